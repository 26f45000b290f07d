package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// PortConfig bounds the HTTP phase of the connections to one listening port: from accept
// until the connection closes or is hijacked (a WebSocket upgrade hands it to the epoll
// engine and it leaves the port's count once net/http's descriptor is closed). Zero values
// mean the defaults noted.
type PortConfig struct {
	// MaxConns is the most connections in their HTTP phase at once, idle keep-alive ones
	// included, beyond what Spare lends; default 256. Each holds a descriptor, a goroutine and two 4 KiB buffers.
	MaxConns int
	// HeaderTimeout bounds reading a request's headers (a WebSocket upgrade is a request
	// too); default RequestTimeout.
	HeaderTimeout time.Duration
	// RequestTimeout bounds reading a whole request, headers and body, from its first byte;
	// default 10s.
	RequestTimeout time.Duration
	// WriteTimeout bounds writing a response from the end of its request's headers; default
	// RequestTimeout, negative means none (pprof's profiles take as long as asked).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for its next request;
	// default 30s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header; default 32 KiB.
	MaxHeaderBytes int
	// Name is the port's name in logs ("api", "metrics", "pprof").
	Name string
	// EvictAfter is how long a connection must have been reading its request before a new
	// connection may take its place; default 100ms. Until then the port stops accepting
	// (the kernel's queue holds newcomers) rather than cut a request that is merely waiting
	// for its goroutine on a busy machine, as a burst of WebSocket upgrades does.
	EvictAfter time.Duration
	// Spare, when set, says how many connections the port may hold beyond MaxConns now:
	// descriptors set aside for others (herald's WebSocket clients) that are not in use. The
	// port counts as full only at MaxConns plus Spare, so that a reconnect storm's upgrades
	// are admitted at once instead of queueing behind a full port and being taken for slow
	// requests. Asked at each admission while the port holds MaxConns or more; it must be
	// cheap and safe for concurrent use. nil means none: MaxConns is the cap.
	Spare func() int
}

func (c PortConfig) withDefaults() PortConfig {
	if c.MaxConns <= 0 {
		c.MaxConns = 256
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = c.RequestTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = c.RequestTimeout
	}
	if c.WriteTimeout < 0 {
		c.WriteTimeout = 0
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = 32 << 10
	}
	if c.EvictAfter <= 0 {
		c.EvictAfter = 100 * time.Millisecond
	}
	return c
}

// Port is a listener that admits at most MaxConns connections in their HTTP phase (more while
// PortConfig.Spare lends it room), and the http.Server (Server) whose deadlines bound each
// request. When the port is full, a new connection takes the place of the connection idle
// longest in keep-alive, else of the one that has been reading its request longest, once that
// has taken EvictAfter (a slow-loris: a request that trickles in holds its place only until
// someone needs it). A connection whose bytes wait unread in the kernel is not slow, the
// server is (its goroutine has not run yet): it is spared, and waits another EvictAfter.
// Until one of those exists the port stops accepting, so a burst of quick requests waits in
// the kernel's queue instead of cutting each other off. A request that has arrived whole and
// is being served (a publish, a WebSocket upgrade) is never evicted; only when nothing has
// given way for RequestTimeout is the new connection closed unserved. So during a flood of slow
// requests, /health, signed publishes and WebSocket upgrades are still served, and the flood
// costs at most MaxConns descriptors plus those Spare lends (which it gives back to newcomers
// once they are asked for). A descriptor shortage at accept (EMFILE) evicts the
// oldest whatever its age, instead of spinning.
//
// Port is safe for concurrent use; its mutex guards the lists and is held for a few pointer
// updates per connection state change.
type Port struct {
	net.Listener
	cfg PortConfig
	log *slog.Logger

	mu   sync.Mutex
	open int           // admitted and not yet closed, hijacked ones included
	idle connList      // keep-alive connections between requests, oldest first
	busy connList      // connections reading a request (headers or body), longest first
	room chan struct{} // signalled when a connection is uncounted; Accept waits on it when full
	// Connections whose request has arrived whole and is being served are on no list: they
	// are not evicted.

	evictedIdle, evictedBusy, refused, fdShort, timedOut atomic.Int64
	borrowed, spared, tlsFailed                          atomic.Int64
	lastWarn, lastTimeoutWarn, lastTLSWarn               atomic.Int64 // unix ns of the last warning of each kind
}

// PortStats are a Port's counts.
type PortStats struct {
	Open, Max int // connections in their HTTP phase now, and the limit
	Idle      int // of Open, keep-alive connections waiting for their next request
	// EvictedIdle and EvictedBusy count connections closed to make room for a new one: idle
	// keep-alive ones, and ones reading a request (slow-loris). Refused counts new connections
	// closed because every connection was being served; FDShortages counts accepts that failed for
	// want of a descriptor; TimedOut counts connections closed because their request's headers
	// (HeaderTimeout: a WebSocket upgrade's handshake_timeout) or body (RequestTimeout) did not
	// arrive in time, a client never sending one included.
	EvictedIdle, EvictedBusy, Refused, FDShortages, TimedOut int64
	// Limit is the cap now: Max plus what PortConfig.Spare lends. Borrowed counts connections
	// admitted while the port held Max or more (on lent room). Spared counts connections that
	// had been reading for EvictAfter when room was needed but were not evicted because their
	// request's bytes waited unread in the kernel (the server was behind, not the client);
	// each is counted once.
	Limit            int
	Borrowed, Spared int64
	// TLSHandshakeFailures counts connections closed because their TLS handshake failed (a
	// plain HTTP request to a TLS port, a client offering nothing the port accepts, a
	// handshake cut short).
	TLSHandshakeFailures int64
}

// NewPort wraps ln. log may be nil.
func NewPort(ln net.Listener, cfg PortConfig, log *slog.Logger) *Port {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	return &Port{Listener: ln, cfg: cfg, log: log.With("port", cfg.Name), room: make(chan struct{}, 1)}
}

// Server returns an http.Server serving h with the port's deadlines and connection
// tracking; serve it on p.
func (p *Port) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           p.track(h),
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ReadHeaderTimeout: p.cfg.HeaderTimeout,
		ReadTimeout:       p.cfg.RequestTimeout,
		WriteTimeout:      p.cfg.WriteTimeout,
		IdleTimeout:       p.cfg.IdleTimeout,
		MaxHeaderBytes:    p.cfg.MaxHeaderBytes,
		ConnState:         p.connState,
		ErrorLog:          log.New(serverLog{p}, "", 0),
	}
}

// tlsHandshakeError starts the line net/http logs for each failed TLS handshake.
const tlsHandshakeError = "http: TLS handshake error from "

// serverLog is the http.Server's error log: its lines become warnings, but those of failed TLS
// handshakes, one per connection (300 plain HTTP requests to a TLS port would be 300 lines),
// which are counted (PortStats.TLSHandshakeFailures) and logged at most once every 10 s with
// the count and the last one's reason.
type serverLog struct{ p *Port }

func (l serverLog) Write(b []byte) (int, error) {
	msg := string(bytes.TrimRight(b, "\n"))
	if !strings.HasPrefix(msg, tlsHandshakeError) {
		l.p.log.Warn(msg)
		return len(b), nil
	}
	n := l.p.tlsFailed.Add(1)
	if due(&l.p.lastTLSWarn) {
		from, reason, _ := strings.Cut(strings.TrimPrefix(msg, tlsHandshakeError), ": ")
		l.p.log.Warn("TLS handshake failed (at most one line every 10 s)", "from", from, "reason", reason, "tls_handshake_failures_total", n)
	}
	return len(b), nil
}

// connKey keys a request's *portConn in its context.
type connKey struct{}

// track marks a connection as serving once its request has arrived whole: at once without a
// body, else when the handler has read the body to its end. A body never read (a request
// refused before it) leaves the connection evictable.
func (p *Port) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := portConnOf(r.Context().Value(connKey{}))
		if c == nil || r.Body == nil || r.Body == http.NoBody || (r.ContentLength == 0 && len(r.TransferEncoding) == 0) {
			if c != nil {
				p.serving(c)
			}
			h.ServeHTTP(w, r)
			return
		}
		// A shallow copy: net/http keeps the original's Body to decide keep-alive.
		r2 := r.WithContext(r.Context())
		r2.Body = &trackedBody{ReadCloser: r.Body, p: p, c: c}
		h.ServeHTTP(w, r2)
	})
}

// trackedBody marks its connection as serving when the body has been read to its end.
type trackedBody struct {
	io.ReadCloser
	p    *Port
	c    *portConn
	done bool
}

func (b *trackedBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if err == io.EOF && !b.done {
		b.done = true
		b.p.serving(b.c)
	}
	return n, err
}

// parsing follows the read of c's request headers: the server is working on the request, not
// waiting for a slow client, so it is not evicted for EvictAfter (net/http reads the headers
// and calls the handler meanwhile). It keeps its place among the requests being read (a
// keep-alive connection's next request joins them now).
func (p *Port) parsing(c *portConn) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.released {
		return
	}
	if c.list == &p.idle {
		c.since, c.behind = now, false
		c.move(&p.busy)
	}
	if c.list == &p.busy {
		c.recheck = now.Add(p.cfg.EvictAfter)
	}
}

// serving takes c off the lists: its request is whole and is being served.
func (p *Port) serving(c *portConn) {
	p.mu.Lock()
	if !c.released && c.list != nil {
		c.list.remove(c)
	}
	p.mu.Unlock()
}

// Stats returns the port's counts.
func (p *Port) Stats() PortStats {
	p.mu.Lock()
	open, idle := p.open, p.idle.n
	p.mu.Unlock()
	return PortStats{Open: open, Idle: idle, Max: p.cfg.MaxConns, EvictedIdle: p.evictedIdle.Load(), EvictedBusy: p.evictedBusy.Load(),
		Refused: p.refused.Load(), FDShortages: p.fdShort.Load(), TimedOut: p.timedOut.Load(),
		Limit: p.limit(), Borrowed: p.borrowed.Load(), Spared: p.spared.Load(), TLSHandshakeFailures: p.tlsFailed.Load()}
}

// limit is the cap now: MaxConns plus what Spare lends.
func (p *Port) limit() int {
	if p.cfg.Spare == nil {
		return p.cfg.MaxConns
	}
	return p.cfg.MaxConns + max(p.cfg.Spare(), 0)
}

// Accept returns the next connection, making room for it when the port is full.
func (p *Port) Accept() (net.Conn, error) {
	for {
		nc, err := p.Listener.Accept()
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
				return nil, err
			}
			// Out of descriptors: free one of ours, and let the kernel's queue wait a
			// moment rather than spin on the error.
			p.fdShort.Add(1)
			p.mu.Lock()
			victim := p.evictLocked(time.Time{})
			p.mu.Unlock()
			if victim != nil {
				victim.Conn.Close()
			}
			p.warn("out of file descriptors at accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c := &portConn{Conn: nc, p: p}
		if p.admit(c) {
			return c, nil
		}
		nc.Close()
	}
}

// admit counts c in, evicting a connection when the port is full; false means c is refused.
// When nothing can be evicted yet (no idle connection, and no request reading for
// EvictAfter but for spared ones), it waits for a place or for the slowest request to age,
// while the kernel's queue holds later connections; it refuses c only when nothing gave way
// within RequestTimeout (every connection being served or upgraded all that time).
func (p *Port) admit(c *portConn) bool {
	deadline := time.Now().Add(p.cfg.RequestTimeout)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		limit := p.cfg.MaxConns
		p.mu.Lock()
		full := p.open >= limit
		p.mu.Unlock()
		if full && p.cfg.Spare != nil {
			limit = p.limit() // asked outside the lock: it reads the WebSocket engine's count
		}
		p.mu.Lock()
		var victim *portConn
		if p.open >= limit {
			victim = p.evictLocked(now)
		}
		if p.open < limit {
			if p.open >= p.cfg.MaxConns {
				p.borrowed.Add(1)
			}
			p.open++
			c.since = now
			c.headers = true
			p.busy.pushBack(c)
			p.mu.Unlock()
			if victim != nil {
				victim.Conn.Close()
				p.warn("HTTP connections at their limit: closed the oldest idle or slowest to make room")
			}
			return true
		}
		if victim != nil {
			// Over the limit (lent room was taken back): shed the slowest, and look again.
			p.mu.Unlock()
			victim.Conn.Close()
			continue
		}
		// Look again when the slowest request will have read for EvictAfter, and at least
		// every EvictAfter: lent room (Spare) frees without a signal.
		wait := min(deadline.Sub(now), p.cfg.EvictAfter, p.nextLook(now))
		p.mu.Unlock()
		if !now.Before(deadline) {
			p.refused.Add(1)
			p.warn("HTTP connections at their limit, none could make room: refusing")
			return false
		}
		if timer == nil {
			timer = time.NewTimer(max(wait, time.Millisecond))
		} else {
			timer.Reset(max(wait, time.Millisecond))
		}
		select {
		case <-p.room:
		case <-timer.C:
		}
	}
}

// evictLocked picks the connection to close for room, uncounts it and returns it for the
// caller to close outside the lock; nil when there is none. An idle keep-alive connection
// goes first, else the one reading its request longest, if it has been reading for
// EvictAfter by now (a zero now: whatever its age, for a descriptor shortage). A connection
// whose request's bytes wait unread in the kernel is not slow, the server is: it is spared
// for another EvictAfter, and so once more when its bytes have been read since (the server is
// parsing them), keeping its place: once it is slow, it is still the oldest. p.mu must be
// held.
func (p *Port) evictLocked(now time.Time) *portConn {
	if victim := p.idle.head; victim != nil {
		p.evictedIdle.Add(1)
		p.releaseLocked(victim)
		return victim
	}
	for victim := p.busy.head; victim != nil; victim = victim.next {
		if !now.IsZero() {
			if now.Sub(victim.since) < p.cfg.EvictAfter {
				return nil // the others began later
			}
			if now.Before(victim.recheck) {
				continue
			}
			if n := unread(victim.Conn); n > 0 || victim.behind {
				if !victim.spared {
					victim.spared = true
					p.spared.Add(1)
				}
				victim.behind = n > 0
				victim.recheck = now.Add(p.cfg.EvictAfter)
				continue
			}
		}
		p.evictedBusy.Add(1)
		p.releaseLocked(victim)
		return victim
	}
	return nil
}

// nextLook is when the slowest request may be evicted: once it has read for EvictAfter and
// its spare, if any, is over. p.mu must be held.
func (p *Port) nextLook(now time.Time) time.Duration {
	h := p.busy.head
	if h == nil {
		return p.cfg.EvictAfter
	}
	at := h.since.Add(p.cfg.EvictAfter)
	if h.recheck.After(at) {
		at = h.recheck
	}
	return at.Sub(now)
}

// releaseLocked uncounts c once. p.mu must be held.
func (p *Port) releaseLocked(c *portConn) {
	if c.released {
		return
	}
	c.released = true
	if c.list != nil {
		c.list.remove(c)
	}
	p.open--
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// connState follows net/http's view of each connection: a request being read is busy (net/http
// reports it active once its headers are in; track takes it off once its body is), a
// keep-alive connection between requests is idle, a hijacked one can no longer be evicted and
// stays counted until its descriptor is closed.
func (p *Port) connState(nc net.Conn, st http.ConnState) {
	c := portConnOf(nc)
	if c == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.released {
		return
	}
	switch st {
	case http.StateActive:
		if c.list != &p.busy { // else it keeps its place, its age counted from its first byte
			c.since, c.recheck, c.behind = time.Now(), time.Time{}, false
			c.move(&p.busy)
		}
		c.headers = false
	case http.StateIdle:
		c.move(&p.idle)
		c.headers, c.tail = true, [3]byte{}
	case http.StateHijacked:
		if c.list != nil {
			c.list.remove(c)
		}
	case http.StateClosed:
		p.releaseLocked(c)
	}
}

// warn logs a capacity warning at most once every 10 s, with the running totals.
func (p *Port) warn(msg string, args ...any) {
	if !due(&p.lastWarn) {
		return
	}
	st := p.Stats()
	p.log.Warn(msg, append(args, "open", st.Open, "max", st.Max, "evicted_idle_total", st.EvictedIdle,
		"evicted_busy_total", st.EvictedBusy, "refused_total", st.Refused)...)
}

// due reports whether a warning whose last one was logged at *last (Unix nanoseconds) may be
// logged now, at most one every 10 s, and if so records now.
func due(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	l := last.Load()
	return now-l >= int64(10*time.Second) && last.CompareAndSwap(l, now)
}

// portConnOf returns the port's connection under v: a *portConn, or a connection wrapping one
// (a TLS connection: tls.Conn and ws's hand-off transport unwrap with NetConn). nil if none.
func portConnOf(v any) *portConn {
	for range 4 {
		switch c := v.(type) {
		case *portConn:
			return c
		case interface{ NetConn() net.Conn }:
			v = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// portConn is one connection counted by a Port. It keeps the descriptor reachable
// (syscall.Conn) so that a WebSocket upgrade can hand it to the epoll engine.
type portConn struct {
	net.Conn
	p *Port

	// Guarded by p.mu.
	list       *connList // the list holding c; nil once hijacked or released
	prev, next *portConn
	released   bool
	timedOut   bool      // counted in TimedOut
	spared     bool      // counted in Spared
	since      time.Time // when it joined busy
	recheck    time.Time // spared: not evicted before this
	behind     bool      // its bytes waited unread at its last look

	// Owned by the connection's goroutine (net/http's, which calls Read and connState): it
	// is reading a request's headers, and the last bytes read (their end may straddle reads).
	headers bool
	tail    [3]byte
}

// Close closes the connection and uncounts it.
func (c *portConn) Close() error {
	err := c.Conn.Close()
	c.p.mu.Lock()
	c.p.releaseLocked(c)
	c.p.mu.Unlock()
	return err
}

// Read reads from the connection. A read that fails on its deadline while a request is being
// read (net/http then closes the connection without a word) is counted and logged, so that a
// handshake cut short on a starved machine is not silent; the keep-alive idle timeout is not.
func (c *portConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.headers && c.headersEnd(b[:n]) {
		c.headers = false
		c.p.parsing(c)
	}
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			c.p.readTimedOut(c)
		}
	}
	return n, err
}

// headersEnd reports whether the headers' end ("\r\n\r\n") is in b, counting the bytes read
// before it.
func (c *portConn) headersEnd(b []byte) bool {
	var joined [6]byte
	head := append(append(joined[:0], c.tail[:]...), b[:min(len(b), 3)]...)
	found := bytes.Contains(head, crlf2) || bytes.Contains(b, crlf2)
	if len(b) >= 3 {
		copy(c.tail[:], b[len(b)-3:])
	} else {
		copy(c.tail[:], append(c.tail[len(b):], b...))
	}
	return found
}

var crlf2 = []byte("\r\n\r\n")

// readTimedOut counts a deadline that ended c's read, if c was reading a request, once per
// connection (net/http may read again before it closes).
func (p *Port) readTimedOut(c *portConn) {
	p.mu.Lock()
	reading := !c.released && c.list == &p.busy && !c.timedOut
	if reading {
		c.timedOut = true
	}
	since := c.since
	p.mu.Unlock()
	if !reading {
		return
	}
	total := p.timedOut.Add(1)
	if !due(&p.lastTimeoutWarn) {
		return
	}
	p.log.Warn("HTTP request not read within its deadline (handshake_timeout for headers and upgrades, rest_request_timeout for bodies): closed",
		"reading_for", time.Since(since).Round(time.Millisecond), "timed_out_total", total)
}

// SyscallConn exposes the descriptor (syscall.Conn).
func (c *portConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("httpapi: connection has no descriptor")
	}
	return sc.SyscallConn()
}

// CloseWrite half-closes the connection, as net/http does before closing.
func (c *portConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// move puts c at the back of l. p.mu must be held.
func (c *portConn) move(l *connList) {
	if c.list != nil {
		c.list.remove(c)
	}
	l.pushBack(c)
}

// connList is an intrusive doubly linked list of connections, in the order they joined it.
type connList struct {
	head, tail *portConn
	n          int
}

func (l *connList) pushBack(c *portConn) {
	c.list, c.prev, c.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.n++
}

func (l *connList) remove(c *portConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.list, c.prev, c.next = nil, nil, nil
	l.n--
}
