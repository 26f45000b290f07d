package ws

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// TLS. A TLS connection is handshaken and upgraded by net/http like any other, over a
// handoffConn: until the upgrade it passes every call through to the accepted connection. On
// Linux, Engine.Attach then takes its descriptor as it does a plain connection's, and the
// handoffConn becomes the TLS layer's transport on the engine's side: the connection's poller
// reads the ciphertext from the socket and hands it to crypto/tls, which decrypts it without
// blocking (handoffConn reports "nothing more yet" as a temporary error, which crypto/tls
// retries on the next read), and the owner's Writev encrypts its frames into records of up to
// 16 KiB and writes each with one write call. The connection keeps crypto/tls's state (a
// tls.Conn, its ciphers and buffers) but no goroutine and no buffer of its own. On the
// portable engine the tls.Conn is used as the net.Conn it is.

// NewTLSListener wraps ln (the public port) so that each connection it accepts speaks TLS
// with cfg and can be handed to an Engine after its WebSocket upgrade.
func NewTLSListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return &tlsListener{Listener: ln, cfg: cfg}
}

type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&handoffConn{Conn: c}, l.cfg), nil
}

// TLSClient returns the client end of a TLS connection over nc (herald-bench), which an
// Engine in client mode can take over after the WebSocket handshake as it takes a server's.
func TLSClient(nc net.Conn, cfg *tls.Config) *tls.Conn {
	return tls.Client(&handoffConn{Conn: nc}, cfg)
}

// errWouldBlock is what a handoffConn taken over by an engine returns when the poller has
// handed it no more ciphertext: crypto/tls keeps what it has and tries again on its next
// Read (a temporary net.Error is not sticky).
var errWouldBlock = &wouldBlock{}

type wouldBlock struct{}

func (*wouldBlock) Error() string   { return "ws: no more input yet" }
func (*wouldBlock) Timeout() bool   { return true }
func (*wouldBlock) Temporary() bool { return true }

var _ net.Error = errWouldBlock

// handoffConn is the transport under a tls.Conn: the accepted connection until an engine
// takes it over (engage), then the engine's socket.
type handoffConn struct {
	net.Conn
	engaged atomic.Bool

	// Engaged: the poller's side, used by crypto/tls's Read on the poller goroutine.
	in  []byte // ciphertext read by the poller and not yet taken by crypto/tls
	eof bool

	// Engaged: the writing side, which crypto/tls's Write uses (the owner, and the poller
	// when it answers a key update).
	mu   sync.Mutex
	fd   int
	out  []byte // ciphertext the kernel has not taken yet
	werr error
}

// NetConn returns the accepted connection (the public port's, which counts it).
func (h *handoffConn) NetConn() net.Conn { return h.Conn }

// engage makes fd, the engine's copy of the descriptor, the transport.
func (h *handoffConn) engage(fd int) {
	h.fd = fd
	h.engaged.Store(true)
}

func (h *handoffConn) Read(b []byte) (int, error) {
	if !h.engaged.Load() {
		return h.Conn.Read(b)
	}
	if len(h.in) == 0 {
		if h.eof {
			return 0, io.EOF
		}
		return 0, errWouldBlock
	}
	n := copy(b, h.in)
	h.in = h.in[n:]
	return n, nil
}

// Write writes b at once as far as the kernel takes it and keeps the rest for flush: a
// record crypto/tls has sealed must go out whole and in order.
func (h *handoffConn) Write(b []byte) (int, error) {
	if !h.engaged.Load() {
		return h.Conn.Write(b)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.werr != nil {
		return 0, h.werr
	}
	total := len(b)
	if len(h.out) == 0 {
		n, err := writeNow(h.fd, b)
		if err != nil {
			h.werr = err
			return 0, err
		}
		b = b[n:]
	}
	h.out = append(h.out, b...)
	return total, nil
}

// flush writes the ciphertext kept back; blocked reports that some is still kept.
func (h *handoffConn) flush() (blocked bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.werr != nil {
		return false, h.werr
	}
	if len(h.out) == 0 {
		return false, nil
	}
	n, err := writeNow(h.fd, h.out)
	if err != nil {
		h.werr = err
		return false, err
	}
	rest := copy(h.out, h.out[n:])
	h.out = h.out[:rest]
	if rest == 0 && cap(h.out) > 64<<10 {
		h.out = nil // a burst's buffer is not kept by an idle connection
	}
	return rest > 0, nil
}

// kept reports whether ciphertext is waiting for the kernel.
func (h *handoffConn) kept() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.out) > 0
}
