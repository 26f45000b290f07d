package ws

import "time"

// Config sizes an Engine. Zero values mean the defaults noted.
type Config struct {
	Pollers         int // goroutines that wait on epoll; default 1
	MaxMessageBytes int // largest message a client may send; default 64 KiB
	ReadBufferBytes int // one scratch buffer per poller; default 64 KiB
	// MaxFD bounds the descriptor table; default: the process's open-file limit.
	MaxFD int
	// Client makes the engine the client end of its connections (herald-bench): the peer's
	// frames must be unmasked, and frames written with AppendClientFrame are masked. The
	// default is the server end.
	Client bool
	// SendBufferBytes sets each connection's kernel send buffer (SO_SNDBUF; the kernel
	// doubles it and caps it at net.core.wmem_max). It bounds the kernel memory a client
	// that stops reading can pin, and so how far behind a close frame can sit. Default 0:
	// the kernel's autotuning (up to net.ipv4.tcp_wmem's maximum, several MiB).
	SendBufferBytes int
	// FrameTimeout bounds the time from the first byte of a frame, or of a fragmented
	// message, to its last; a peer that takes longer gets OnProtocolError with
	// ClosePolicy. Checked by the pollers about 4 times per timeout (at most every second),
	// only while some connection has a frame in progress. Default 20s; negative: no bound.
	FrameTimeout time.Duration
}

// withDefaults fills the portable defaults (MaxFD is the epoll engine's own).
func (c Config) withDefaults() Config {
	if c.Pollers <= 0 {
		c.Pollers = 1
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 10
	}
	if c.ReadBufferBytes <= 0 {
		c.ReadBufferBytes = 64 << 10
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = 20 * time.Second
	}
	return c
}
