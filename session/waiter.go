package session

import (
	"sync"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
)

// waiter is a subscription that waited at its channel's gate (cluster.Gate) for the node's
// interest on the bus, or one to a presence channel (then member.UserID is the member it
// joined as). Its state changes holding the gate; its connection's read side reads it
// without.
type waiter struct {
	s      *Server
	c      *conn
	ch     *cluster.Channel
	member herald.Member
	since  *herald.Position // the position it asks to recover from; nil: none
	state  atomic.Int32
	// late: it waits for the node's copy of the history to reach since (caughtUp), not at
	// the gate (from the start, or from when the gate opened); mu then orders its entering
	// with its connection leaving it (settle).
	late atomic.Bool
	mu   sync.Mutex
}

const (
	waiting   int32 = iota // queued at the gate
	joined                 // confirmed: an ordinary subscription from then on
	failed                 // refused when the gate opened (presence channel full); it holds nothing
	cancelled              // left before it was confirmed
)

var _ cluster.Waiter = (*waiter)(nil)

// Enter implements cluster.Waiter: the gate opened, the subscription enters its channel;
// one that recovers from a position the node's copy of the history has not reached yet
// waits for it first (cluster.State.CatchUp), as it would have had the gate been open.
func (w *waiter) Enter() bool {
	if w.state.Load() != waiting {
		return true
	}
	if w.since != nil && !w.late.Load() {
		w.late.Store(true)
		if w.s.st.CatchUp(w.c.app.st, w.ch, w.since, w.caughtUp) {
			return true // entered, or sent to try again, by caughtUp
		}
	}
	if w.s.enter(w.c, w.ch, w.member, w.since) {
		w.state.Store(joined)
		w.member.Info = nil // the presence channel has it; the subscription keeps the id
		return true
	}
	w.state.Store(failed)
	return false
}

// caughtUp enters a subscription that waited for the node's copy of the channel's history
// (cluster.State.CatchUp), unless its connection has left it meanwhile. When the copy did
// not catch up (ok false), answering would hand the client back a position below its own,
// and the events between again: its connection is closed instead (4200), so that it
// reconnects and recovers, here or on another node, once one has its position; the
// subscription, still waiting, is given back as the connection leaves (settle).
func (w *waiter) caughtUp(ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state.Load() != waiting {
		return
	}
	if !ok {
		w.s.recoveries.count(false, OutcomeBehind)
		w.s.eng.Close(&w.c.Conn, closeFrames(herald.CodeReconnect.PusherCode(),
			"this node has not yet received the events up to your position in "+w.ch.Name()+", reconnect to recover them"))
		return
	}
	if !w.Enter() {
		w.Refused()
	}
}

// Refused implements cluster.Waiter: a full presence channel refused the subscription.
func (w *waiter) Refused() {
	w.s.forget(w.c.app, w.ch)
	w.s.subError(w.c, w.ch.Name(), "LimitReached", "presence channel is full", 4100)
}

// settle ends a subscription that may still be waiting, as its connection leaves it. It
// reports whether the subscription had entered its channel: when not, it held only its
// reference to the channel, which settle gives back.
func (s *Server) settle(c *conn, sb sub) (entered bool) {
	w := sb.w
	if w == nil {
		return true
	}
	if !w.late.Load() {
		if g := sb.ch.Gate(); !g.Open() && g.Cancel(w) {
			w.state.Store(cancelled)
			s.forget(c.app, sb.ch)
			return false
		}
		// The gate has opened (Cancel held it until Enter was done): Enter may have
		// made w wait for the copy of the history (late).
	}
	if w.late.Load() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.state.Load() == waiting {
			w.state.Store(cancelled)
			s.forget(c.app, sb.ch)
			return false
		}
	}
	return w.state.Load() == joined
}
