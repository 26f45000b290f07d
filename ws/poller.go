//go:build linux && !heraldportable

package ws

import (
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// clientBatchDelay is how long a client-mode poller sleeps after a batch before it polls again
// without blocking; it blocks only once a poll finds nothing. A poller blocked in epoll_wait
// makes the peer's every write wake it, at the writer's expense: in fanout 10,000 against
// bench/floor (herald-bench, 2 cores) the delay took the client from 7.8-8.8 to 4.6-5.6 us of
// CPU per delivery and floor from 13.6-15.0 to 11.8-13.2 us; 50 us to 1 ms measured alike.
const clientBatchDelay = 100 * time.Microsecond

// poller waits on one epoll instance and reads every connection registered with it.
type poller struct {
	e      *Engine
	epfd   int
	wakefd int // eventfd that interrupts EpollWait on Close
	buf    []byte
	// more holds connections that filled the read buffer in their last turn and may have
	// more to read: each gets one buffer per turn, so one flooding client cannot keep the
	// others on its poller waiting.
	more, turn []*Conn
	// held holds the connections a hold keeps unread (Conn.Hold) with the engine ms their
	// hold ends at; heldSpare is the list release is not using.
	held, heldSpare []heldConn
	// timed counts this poller's connections with a frame in progress (Conn.since != 0);
	// only while it is non-zero does the poller wake to check their age. Attach's parse of
	// early bytes runs on another goroutine, hence the atomic.
	timed  atomic.Int32
	scanAt uint32 // engine ms of the next age check
	// tls marks a poller of TLS connections (tls_linux.go): each of its Conns is a tlsConn's,
	// whose reads go through the TLS layer into plain.
	tls   bool
	plain []byte
}

// readState is where a connection stands in its poller's turns.
type readState uint8

const (
	readIdle readState = iota // read when its socket says so
	readMore                  // in the more list: it filled the read buffer in its last turn
	readHeld                  // in the held list: not read until its hold ends
)

// heldConn is a held connection and the engine ms its hold ends at.
type heldConn struct {
	c     *Conn
	until uint32
}

func newPoller(e *Engine) (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		syscall.Close(epfd)
		return nil, errno
	}
	p := &poller{e: e, epfd: epfd, wakefd: int(r), buf: make([]byte, e.cfg.ReadBufferBytes)}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(p.wakefd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.wakefd, &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(p.wakefd)
		return nil, err
	}
	return p, nil
}

func (p *poller) wake() {
	one := uint64(1)
	syscall.Write(p.wakefd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

func (p *poller) run() {
	defer p.e.wg.Done()
	events := make([]syscall.EpollEvent, 256)
	wait := -1 // EpollWait's timeout: block
	for {
		if p.e.cfg.Client && wait == 0 {
			time.Sleep(clientBatchDelay)
		}
		if len(p.more) > 0 {
			wait = 0 // connections still have bytes: poll, then give them their turn
		} else if wait < 0 && p.timed.Load() > 0 {
			wait = int(p.e.every.Milliseconds()) // frames in progress: wake to check their age
		}
		if len(p.held) > 0 {
			wait = p.untilHeld(wait)
		}
		n, err := syscall.EpollWait(p.epfd, events, wait)
		wait = -1
		if p.e.cfg.Client && n > 0 {
			wait = 0 // after a batch: sleep, then poll without blocking
		}
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		for i := 0; i < n; i++ {
			fd := int(events[i].Fd)
			if fd == p.wakefd {
				if p.e.closing.Load() {
					return
				}
				continue
			}
			if fd < 0 || fd >= len(p.e.table) {
				continue
			}
			c := p.e.table[fd].Load()
			if c == nil || c.p != p {
				continue
			}
			ev := events[i].Events
			if ev&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 && c.turn == readIdle {
				p.readTurn(c)
			}
			if !c.gone && ev&syscall.EPOLLOUT != 0 && c.armed.CompareAndSwap(true, false) {
				if p.tls && p.flushTLS(c) {
					continue // still kept back: the next writable edge tries again
				}
				p.e.h.OnWritable(c)
			}
		}
		// One more turn for each connection that had more than a buffer's worth.
		p.turn, p.more = p.more, p.turn[:0]
		for i, c := range p.turn {
			c.turn = readIdle
			p.turn[i] = nil
			if !c.gone {
				p.readTurn(c)
			}
		}
		if len(p.held) > 0 {
			p.release(p.e.ms())
		}
		if p.timed.Load() > 0 {
			if now := p.e.ms(); int32(now-p.scanAt) >= 0 {
				p.scanAt = now + uint32(p.e.every.Milliseconds())
				p.expire(now)
			}
		}
	}
}

// expire fails this poller's connections whose frame in progress began more than the frame
// timeout ago. It walks the descriptor table (up to the highest descriptor attached), which
// costs about as much as the fan-out engine's once-a-second sweep of its connections and needs no
// per-connection timer or list; it runs only while some frame is in progress.
func (p *poller) expire(now uint32) {
	limit := uint32(p.e.cfg.FrameTimeout.Milliseconds())
	hi := min(int(p.e.hiFD.Load()), len(p.e.table)-1)
	for fd := 0; fd <= hi; fd++ {
		c := p.e.table[fd].Load()
		if c == nil || c.p != p || c.since == 0 || now-c.since < limit {
			continue
		}
		c.rbuf = nil
		p.fail(c, ClosePolicy, "frame not completed within "+p.e.cfg.FrameTimeout.String())
		p.track(c, false)
	}
}

// readTurn reads c for one turn and queues it for another if it may have more.
func (p *poller) readTurn(c *Conn) {
	if p.read(c) {
		c.turn = readMore
		p.more = append(p.more, c)
	}
}

// Hold stops reading c for d (at least a millisecond): what its client sends meanwhile waits in
// the kernel, and its writes block once the kernel's buffers are full, so a client over a rate
// is read no faster than the rate allows. The messages already read and not yet handled wait
// with it. Call it from the handler (on c's poller); a connection held already keeps its hold.
func (c *Conn) Hold(d time.Duration) {
	if c.turn == readHeld || c.gone {
		return
	}
	p := c.p
	c.turn = readHeld
	p.held = append(p.held, heldConn{c: c, until: p.e.ms() + uint32(max(d.Milliseconds(), 1))})
}

// untilHeld is EpollWait's timeout given wait (-1: block) and the held connections: the
// earlier of wait and the first hold's end.
func (p *poller) untilHeld(wait int) int {
	now := p.e.ms()
	for _, h := range p.held {
		d := max(int(int32(h.until-now)), 0)
		if wait < 0 || d < wait {
			wait = d
		}
	}
	return wait
}

// release ends the holds due by now: each connection handles the messages it sent before,
// then is read again (unless a message held it anew).
func (p *poller) release(now uint32) {
	list := p.held
	p.held = p.heldSpare[:0]
	for _, h := range list {
		c := h.c
		switch {
		case c.gone || c.turn != readHeld:
		case int32(now-h.until) < 0:
			p.held = append(p.held, h)
		default:
			c.turn = readIdle
			if !c.broken {
				p.feed(c, nil)
			}
			if c.turn == readIdle && !c.gone {
				p.readTurn(c)
			}
		}
	}
	clear(list)
	p.heldSpare = list[:0]
}

// read drains the socket (the registration is edge-triggered), but for at most one buffer's
// worth of bytes: it returns true when it stopped there, before the socket said EAGAIN.
func (p *poller) read(c *Conn) (more bool) {
	got := 0
	for !c.gone {
		if got >= len(p.buf) {
			return true
		}
		n, err := syscall.Read(c.fd, p.buf)
		if n > 0 {
			got += n
			switch {
			case c.broken:
			case p.tls:
				if !p.feedTLS(c, p.buf[:n]) {
					p.hangup(c)
					return false
				}
			default:
				p.feed(c, p.buf[:n])
			}
			if c.turn == readHeld {
				return false // what the socket holds waits for the hold's end
			}
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			return false
		}
		p.hangup(c)
		return false
	}
	return false
}

// hangup unregisters c and tells the handler, once.
func (p *poller) hangup(c *Conn) {
	c.gone = true
	_ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	p.e.table[c.fd].CompareAndSwap(c, nil)
	c.rbuf, c.msg = nil, nil
	c.msgOp = 0
	p.track(c, false)
	p.e.h.OnHangup(c)
}
