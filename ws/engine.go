//go:build linux && !heraldportable

package ws

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Engine owns the pollers. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	h       Handler
	pollers []*poller
	table   []atomic.Pointer[Conn] // by fd: a connection's descriptor is unique while it is open
	next    atomic.Uint32
	closing atomic.Bool
	wg      sync.WaitGroup
	once    sync.Once
	start   time.Time     // the zero of the engine's millisecond clock (Conn.since)
	hiFD    atomic.Int32  // the highest descriptor attached: the pollers' timeout scans stop there
	every   time.Duration // how often a poller with frames in progress checks their age

	tlsMu      sync.Mutex
	tlsPollers []*poller // the TLS connections' pollers, started by the first one (tls_linux.go)
}

// NewEngine starts cfg.Pollers pollers delivering to h. Stop them with Close.
func NewEngine(cfg Config, h Handler) (*Engine, error) {
	cfg = cfg.withDefaults()
	if cfg.MaxFD <= 0 {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return nil, fmt.Errorf("read open-file limit: %w", err)
		}
		cfg.MaxFD = int(rl.Cur)
	}
	e := &Engine{cfg: cfg, h: h, table: make([]atomic.Pointer[Conn], cfg.MaxFD), start: time.Now(),
		every: min(max(cfg.FrameTimeout/4, 10*time.Millisecond), time.Second)}
	for i := 0; i < cfg.Pollers; i++ {
		p, err := newPoller(e)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.pollers = append(e.pollers, p)
	}
	for _, p := range e.pollers {
		e.wg.Add(1)
		go p.run()
	}
	return e, nil
}

// Attach takes over nc, a hijacked TCP connection whose WebSocket handshake is complete:
// its descriptor is duplicated into the engine and nc is closed, so the connection costs one
// descriptor and no goroutine. pre holds bytes the client sent after its handshake. bind is
// called with the new connection before any event for it can be delivered: it sets c.Data
// and hands the connection to its owner.
func (e *Engine) Attach(nc net.Conn, pre []byte, bind func(*Conn)) (*Conn, error) {
	if e.closing.Load() {
		nc.Close()
		return nil, errors.New("ws: engine closed")
	}
	if tc, ok := nc.(*tls.Conn); ok {
		if h, ok := tc.NetConn().(*handoffConn); ok {
			return e.attachTLS(tc, h, pre, bind)
		}
	}
	fd, err := e.takeFD(nc)
	if err != nil {
		return nil, err
	}
	p := e.pollers[int(e.next.Add(1))%len(e.pollers)]
	c := &Conn{fd: fd, p: p}
	bind(c)
	if len(pre) > 0 {
		// Nothing else sees c yet, so parsing here is single-threaded like the poller's.
		p.feed(c, pre)
	}
	return c, e.register(c, p)
}

// register publishes c, bound and fed, to its poller.
func (e *Engine) register(c *Conn, p *poller) error {
	fd := c.fd
	// Published only now: the poller may still hold a ready event for a previous connection
	// that had this descriptor number, and must not read c while pre is parsed.
	e.table[fd].Store(c)
	for hi := e.hiFD.Load(); int32(fd) > hi && !e.hiFD.CompareAndSwap(hi, int32(fd)); hi = e.hiFD.Load() {
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | epollET, Fd: int32(fd)}
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		// The owner already holds c: report a hang-up so it releases c the usual way.
		p.hangup(c)
		return fmt.Errorf("ws: epoll add: %w", err)
	}
	return nil
}

// Close stops the pollers and waits for them. Connections are not closed: their owner
// shuts them down first and closes them after their hang-ups.
func (e *Engine) Close() error {
	e.once.Do(func() {
		e.tlsMu.Lock()
		e.closing.Store(true)
		all := append(append([]*poller(nil), e.pollers...), e.tlsPollers...)
		e.tlsMu.Unlock()
		for _, p := range all {
			p.wake()
		}
		e.wg.Wait()
		for _, p := range all {
			syscall.Close(p.epfd)
			syscall.Close(p.wakefd)
		}
	})
	return nil
}

const epollET = 1 << 31 // EPOLLET; the syscall package's constant is negative

// ms is the engine's clock for frame timeouts: milliseconds since start, plus one so that
// 0 can mean "no frame in progress". It wraps after 49 days, which differences survive.
func (e *Engine) ms() uint32 {
	t := uint32(time.Since(e.start).Milliseconds()) + 1
	return max(t, 1)
}

func dupCloexec(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}
