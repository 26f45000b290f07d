package fanout

import (
	"strconv"
	"sync/atomic"
)

// Transport is what a worker needs of a connection's socket (*ws.Conn in production).
type Transport interface {
	// Writev writes bufs in order, as much as the socket takes now: n bytes, and blocked
	// when the socket is full (the engine waits for Engine.Writable).
	Writev(bufs [][]byte) (n int, blocked bool, err error)
	// Shutdown ends the write side once what was written is out.
	Shutdown()
	// Close releases the socket.
	Close() error
}

// RoomMaker is a Transport that can let a few more bytes into the kernel whatever the peer
// has left unread (*ws.Conn.MakeRoom): a slow consumer's close frame then goes out at once.
type RoomMaker interface {
	MakeRoom(n int) error
}

// Backlogger is a Transport that can tell what the kernel holds for the socket
// (*ws.Conn.Backlog): bytes received but not read yet, and bytes written but not yet
// acknowledged by the peer.
type Backlogger interface {
	Backlog() (unread, unsent int, err error)
}

// Conn is one connection's outbound side. The layer above embeds it in its own connection
// and hands it to Engine.Init, then Engine.Attach. Its worker alone touches its queue; the
// read side shares only the atomics (LastSeen, the close code).
type Conn struct {
	// Touched by the worker on every delivery and flush: first, on as few cache lines as
	// they fit in (a fan-out to 10,000 connections reads each of them).
	out      [][]byte  // queued frames; out[0] may be the unwritten tail of a frame; nil when given back (worker.outs)
	outBytes int       // their bytes
	t        Transport // the socket
	m        *Counters // the group's counters on this connection's worker
	num      uint64    // unique per node; the second half of the socket id
	dirty    bool      // in worker.dirty
	headCut  bool      // out[0] is the unwritten tail of a frame
	blocked  bool      // waiting for the socket to drain
	closing  bool      // a close frame is queued; nothing else is
	shut     bool      // Shutdown called
	replays  bool      // rep is not nil: flush feeds its replays

	// Owned by the worker, touched less often.
	w    *worker
	widx int // index in worker.conns
	// at is, until closing, when the engine pinged (0 when no ping is outstanding); once
	// closing, the deadline for the close frame to leave. One field: a closing connection is
	// not pinged.
	at  int64
	rep *replay // its replays in progress (replay.go), in subscription order

	lastSeen  atomic.Int64 // engine clock (ms) of the last frame received
	closeCode atomic.Int32 // the first close code sent or received; 0: none yet (see ClosedWith)
	wrote     uint32       // when the worker last wrote to it (stamp); in what closeCode leaves of its word
}

// ID returns the connection's socket id, "prefix.num", made on each call: every idle
// connection would pay for keeping it (TestConnNoSocketID). Call it once where it is used
// more than once.
func (c *Conn) ID() string { return c.w.e.prefix + "." + strconv.FormatUint(c.num, 10) }

// Num is the connection's number on this node (the socket id's second half): what
// Dispatch's exclusion compares.
func (c *Conn) Num() uint64 { return c.num }

// Counters are the connection's group's counters on its worker.
func (c *Conn) Counters() *Counters { return c.m }

// Transport is the connection's socket, once attached (nil before).
func (c *Conn) Transport() Transport { return c.t }

// Worker is the index of the connection's worker.
func (c *Conn) Worker() int { return c.w.idx }

// Seen records that a frame arrived now (engine clock, ms): the connection is not silent.
func (c *Conn) Seen(now int64) { c.lastSeen.Store(now) }

// ClosedWith records code as the connection's close code unless it has one.
func (c *Conn) ClosedWith(code int) { c.closeCode.CompareAndSwap(0, int32(code)) }

// CloseCode is the first close code sent or received; 0 when none.
func (c *Conn) CloseCode() int { return int(c.closeCode.Load()) }

// consume drops n written bytes from the front of c's queue.
func (c *Conn) consume(n int) {
	c.outBytes -= n
	k := 0
	for k < len(c.out) && n >= len(c.out[k]) {
		n -= len(c.out[k])
		k++
	}
	if k < len(c.out) && n > 0 {
		c.out[k] = c.out[k][n:]
		c.headCut = true
	} else {
		c.headCut = false
	}
	if k > 0 {
		m := copy(c.out, c.out[k:])
		clear(c.out[m:])
		c.out = c.out[:m]
	}
}

// parseSocketID returns the number part of a socket id issued with prefix (0 if none).
func parseSocketID(prefix, sid string) uint64 {
	if len(sid) <= len(prefix)+1 || sid[:len(prefix)] != prefix || sid[len(prefix)] != '.' {
		return 0
	}
	n, err := strconv.ParseUint(sid[len(prefix)+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}
