//go:build !linux || heraldportable

package ws

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// This is the portable engine, built on every system but Linux (and on Linux with the build
// tag heraldportable, so that its tests run there): two goroutines and a read buffer per
// connection on top of net.Conn. It keeps the API and the Handler contract of the epoll
// engine but none of its economy (rule 9 of docs/architecture.md): it is the development
// path for macOS and Windows, not a way to serve many connections.

// Engine owns the connections' reader and writer goroutines. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	h       Handler
	pollers []*poller
	next    atomic.Uint32
	closing atomic.Bool
	start   time.Time // the zero of the engine's millisecond clock (Conn.since)
}

// poller is a group of connections that share a frame-timeout counter; the portable engine
// reads each connection on a goroutine of its own.
type poller struct {
	e *Engine
	// timed counts the group's connections with a frame in progress (Conn.since != 0).
	timed atomic.Int32
}

// portableReadBytes caps a connection's read buffer: each connection has its own here.
const portableReadBytes = 16 << 10

// portableRoom is how many bytes a connection queues for its writer goroutine before Writev
// reports it blocked, when Config.SendBufferBytes does not say.
const portableRoom = 256 << 10

// portableLinger bounds how long a connection that was shut down or closed keeps trying to
// send what it had queued to a peer that reads slowly, as the kernel keeps sending what a
// closed socket left in its buffer: a slow consumer's close frame must still reach it.
const portableLinger = time.Minute

// NewEngine returns an engine delivering to h. Stop it with Close.
func NewEngine(cfg Config, h Handler) (*Engine, error) {
	cfg = cfg.withDefaults()
	e := &Engine{cfg: cfg, h: h, start: time.Now()}
	for i := 0; i < cfg.Pollers; i++ {
		e.pollers = append(e.pollers, &poller{e: e})
	}
	return e, nil
}

// Attach takes over nc, a hijacked connection whose WebSocket handshake is complete, and
// starts its reader and writer goroutines. pre holds bytes the client sent after its
// handshake. bind is called with the new connection before any event for it can be
// delivered: it sets c.Data and hands the connection to its owner.
func (e *Engine) Attach(nc net.Conn, pre []byte, bind func(*Conn)) (*Conn, error) {
	if e.closing.Load() {
		nc.Close()
		return nil, errors.New("ws: engine closed")
	}
	room := portableRoom
	if e.cfg.SendBufferBytes > 0 {
		room = e.cfg.SendBufferBytes
		if b, ok := nc.(interface{ SetWriteBuffer(int) error }); ok {
			_ = b.SetWriteBuffer(e.cfg.SendBufferBytes)
		}
	}
	p := e.pollers[int(e.next.Add(1))%len(e.pollers)]
	c := &Conn{nc: nc, p: p, room: room, wake: make(chan struct{}, 1)}
	bind(c)
	if len(pre) > 0 {
		c.hmu.Lock()
		p.feed(c, pre)
		c.hmu.Unlock()
	}
	go c.readLoop(min(e.cfg.ReadBufferBytes, portableReadBytes))
	go c.writeLoop()
	return c, nil
}

// Close marks the engine closed: Attach refuses new connections. Connections are not
// closed: their owner shuts them down first and closes them after their hang-ups.
func (e *Engine) Close() error {
	e.closing.Store(true)
	return nil
}

// ms is the engine's clock for frame timeouts: milliseconds since start, plus one so that
// 0 can mean "no frame in progress". It wraps after 49 days, which differences survive.
func (e *Engine) ms() uint32 {
	t := uint32(time.Since(e.start).Milliseconds()) + 1
	return max(t, 1)
}
