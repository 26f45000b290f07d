package hub

import (
	"strconv"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
)

// transport is what a worker needs from a connection's socket (*ws.Conn in production).
type transport interface {
	Writev(bufs [][]byte) (n int, blocked bool, err error)
	Shutdown()
	Close() error
}

// roomMaker is a transport that can let a few more bytes into the kernel whatever the peer
// has left unread (*ws.Conn.MakeRoom): a slow consumer's close frame then goes out at once.
type roomMaker interface {
	MakeRoom(n int) error
}

// Conn is one client connection as the hub sees it.
type Conn struct {
	t   transport
	w   *worker
	app *appState
	num uint64    // unique per node; the second half of the socket id
	sid string    // socket id "prefix.num"
	m   *counters // the app's counters on this connection's worker

	lastSeen  atomic.Int64 // hub clock (ms) of the last frame received
	closeCode atomic.Int32 // the first close code sent or received; 0: none yet (see closedWith)

	// Read side: owned by the connection's poller goroutine until the hang-up, then by the
	// worker.
	subs     []sub
	user     string       // signed-in user id
	watching []string     // the user ids of its watchlist (see watchlist.go)
	events   guard.Bucket // client-event rate

	// Write side: owned by the worker.
	out      [][]byte // queued frames; out[0] may be the unwritten tail of a frame
	outBytes int
	widx     int   // index in worker.conns
	pingAt   int64 // when the server pinged; 0 when no ping is outstanding
	closeAt  int64 // when closing: the deadline for the close frame to leave
	dirty    bool  // in worker.dirty
	headCut  bool  // out[0] is the unwritten tail of a frame
	blocked  bool  // waiting for the socket to drain
	closing  bool  // a close frame is queued; nothing else is
	shut     bool  // Shutdown called
}

// sub is one channel a connection joined: two words for a public or private channel.
type sub struct {
	ch *Channel
	// w is set for a presence channel (the member this connection joined as) and, in a
	// cluster, for a subscription that waited for the bus (its state, see settle).
	w *waiter
}

// userID is the member a presence subscription joined as ("" for other channels).
func (s sub) userID() string {
	if s.w == nil {
		return ""
	}
	return s.w.member.UserID
}

// closedWith records code as the connection's close code unless it has one.
func (c *Conn) closedWith(code int) { c.closeCode.CompareAndSwap(0, int32(code)) }

// SocketID returns the connection's Pusher socket id.
func (c *Conn) SocketID() string { return c.sid }

// App returns the connection's app.
func (c *Conn) App() *herald.App { return c.app.app }

// subIndex returns the index of c's subscription to name, or -1. A subscription the bus
// confirmation refused (see confirm) is dropped here: it holds nothing.
func (c *Conn) subIndex(name string) int {
	for i := range c.subs {
		if c.subs[i].ch.name == name {
			if w := c.subs[i].w; w != nil && w.state.Load() == failed {
				c.subs = append(c.subs[:i], c.subs[i+1:]...)
				return -1
			}
			return i
		}
	}
	return -1
}

// confirmed reports whether the subscription has entered its channel (always, on a single
// node).
func (s sub) confirmed() bool { return s.w == nil || s.w.state.Load() == joined }

// parseSocketID returns the number part of a socket id issued by this node (0 if none).
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
