//go:build !linux || heraldportable

package ws

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is one WebSocket connection after its handshake. Reading state belongs to the
// connection's reader goroutine; Writev, Shutdown and Close belong to one owner goroutine
// at a time (herald's fan-out worker).
type Conn struct {
	nc   net.Conn
	p    *poller
	shut atomic.Bool // Shutdown was called: the reader reports the hang-up

	// hmu orders the handler's calls for this connection (reader and writer goroutines)
	// and guards the read state below.
	hmu    sync.Mutex
	rbuf   *[]byte // unparsed bytes of a frame that has not fully arrived (see conn.go)
	msg    *[]byte // fragments of a message in progress (set while msgOp is; see conn.go)
	msgOp  Opcode
	broken bool   // a protocol error was reported: input is discarded
	gone   bool   // hang-up reported
	since  uint32 // engine ms plus one when the frame in progress began; 0 when none is
	hold   uint32 // engine ms a hold ends at (Hold); 0: none

	// mu guards the write state below; it is never held while calling the handler.
	mu      sync.Mutex
	pending []byte // accepted by Writev, not yet written
	spare   []byte // the writer's other buffer
	room    int    // how many bytes pending may hold
	armed   bool   // a Writev was short: report OnWritable once there is room
	werr    error  // the writer's error, returned by the next Writev
	closed  bool
	wake    chan struct{}

	// Data is the owner's per-connection state, set before the connection is attached.
	Data any
}

// ErrClosed is returned by writes on a closed connection.
var ErrClosed = errors.New("ws: connection closed")

// Writev queues bufs for the connection's writer goroutine and never blocks. It does not
// modify bufs. It returns how many bytes it took; blocked is true when the queue filled
// first, in which case the handler's OnWritable is called once the queue drains.
func (c *Conn) Writev(bufs [][]byte) (n int, blocked bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, false, ErrClosed
	}
	if c.werr != nil {
		return 0, false, c.werr
	}
	for _, b := range bufs {
		take := min(len(b), c.room-len(c.pending))
		c.pending = append(c.pending, b[:take]...)
		n += take
		if take < len(b) {
			blocked = true
			break
		}
	}
	c.armed = c.armed || blocked
	if n > 0 {
		c.signal()
	}
	return n, blocked, nil
}

// MakeRoom lets the queue take n more bytes now however much it holds, so that a
// connection being cut off can queue its close frame behind the bytes already queued.
func (c *Conn) MakeRoom(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.room = max(c.room, len(c.pending)+n)
	return nil
}

// Shutdown ends the connection in both directions; bytes already queued still go out first
// (for at most a minute). The reader reports the hang-up afterwards.
func (c *Conn) Shutdown() {
	if c.shut.Swap(true) {
		return
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(portableLinger))
	_ = c.nc.SetReadDeadline(time.Unix(1, 0)) // wakes the reader, which sees shut
	c.mu.Lock()
	c.signal()
	c.mu.Unlock()
}

// Close releases the socket once what is queued has gone out (for at most a minute).
// Call it once, after OnHangup, when nothing writes any more.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	_ = c.nc.SetWriteDeadline(time.Now().Add(portableLinger))
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	c.signal()
	return nil
}

// signal wakes the writer. mu is held.
func (c *Conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes what Writev queued, reports writability after a short Writev, and closes
// the socket after Close.
func (c *Conn) writeLoop() {
	halfClosed := false
	for range c.wake {
		for {
			c.mu.Lock()
			out := c.pending
			c.pending, c.spare = c.spare[:0], nil
			closed := c.closed
			c.mu.Unlock()
			if len(out) == 0 {
				c.mu.Lock()
				c.spare = out
				c.mu.Unlock()
				if closed {
					c.nc.Close()
					return
				}
				if c.shut.Load() && !halfClosed {
					halfClosed = true
					if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
						_ = cw.CloseWrite()
					}
				}
				break
			}
			_, err := c.nc.Write(out)
			c.mu.Lock()
			c.spare = out[:0]
			if err != nil && c.werr == nil {
				c.werr = err
				c.pending = c.pending[:0]
			}
			notify := c.armed && len(c.pending) < c.room && c.werr == nil
			if notify {
				c.armed = false
			}
			c.mu.Unlock()
			if notify {
				c.hmu.Lock()
				if !c.gone {
					c.p.e.h.OnWritable(c)
				}
				c.hmu.Unlock()
			}
		}
	}
}

// readLoop reads the connection until it ends, parses what arrives and reports the hang-up.
func (c *Conn) readLoop(size int) {
	p, buf := c.p, make([]byte, size)
	var deadline time.Time // the read deadline set for a frame in progress
	for {
		// A frame in progress must complete within the frame timeout.
		want := time.Time{}
		if c.since != 0 && p.e.cfg.FrameTimeout > 0 {
			want = p.e.start.Add(time.Duration(c.since-1)*time.Millisecond + p.e.cfg.FrameTimeout)
		}
		if !want.Equal(deadline) && !c.shut.Load() {
			deadline = want
			_ = c.nc.SetReadDeadline(want)
		}
		if c.shut.Load() {
			break
		}
		n, err := c.nc.Read(buf)
		if n > 0 {
			c.hmu.Lock()
			if !c.broken {
				p.feed(c, buf[:n])
			}
			for c.hold != 0 && !c.shut.Load() {
				// Held: what arrived waits, and so does the socket, until the hold's end.
				d := time.Duration(int32(c.hold-p.e.ms())) * time.Millisecond
				c.hmu.Unlock()
				time.Sleep(max(d, 0))
				c.hmu.Lock()
				c.hold = 0
				if !c.broken {
					p.feed(c, nil)
				}
			}
			c.hmu.Unlock()
		}
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !c.shut.Load() && c.since != 0 {
			c.hmu.Lock()
			c.rbuf = nil
			p.fail(c, ClosePolicy, "frame not completed within "+p.e.cfg.FrameTimeout.String())
			p.track(c, false)
			c.hmu.Unlock()
			continue
		}
		break
	}
	c.hmu.Lock()
	c.gone = true
	c.rbuf, c.msg = nil, nil
	c.msgOp = 0
	p.track(c, false)
	p.e.h.OnHangup(c)
	c.hmu.Unlock()
}

// PeerAddr is the address of the connection's client (the zero Addr when the socket cannot
// tell).
func (c *Conn) PeerAddr() netip.Addr {
	if ap, err := netip.ParseAddrPort(c.nc.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// Hold stops reading c for d (at least a millisecond): what its client sends meanwhile waits in
// the kernel, so a client over a rate is read no faster than the rate allows. Call it from the
// handler; a connection held already keeps its hold.
func (c *Conn) Hold(d time.Duration) {
	if c.hold == 0 && !c.gone {
		c.hold = c.p.e.ms() + uint32(max(d.Milliseconds(), 1))
	}
}

// held reports whether a hold keeps c unread (Hold).
func (c *Conn) held() bool { return c.hold != 0 }
