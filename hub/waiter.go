package hub

import (
	"sync/atomic"

	"github.com/herald-rt/herald"
)

// In a cluster, a subscription to a channel this node has no interest in yet on the bus
// waits: it is confirmed (subscription_succeeded) only once the core has taken the interest
// (core.takeInterest), so the subscriber misses nothing another node publishes after it.

// waiter is a subscription that waited for its channel's interest on the bus, or one to a
// presence channel (then member.UserID is the member it joined as). Its state changes under
// busInterest.mu; its connection's read side reads it without the lock.
type waiter struct {
	c      *Conn
	member herald.Member
	state  atomic.Int32
}

const (
	waiting   int32 = iota // queued on busInterest.waiting
	joined                 // confirmed: an ordinary subscription from then on
	failed                 // refused on confirmation (presence channel full); it holds nothing
	cancelled              // left before it was confirmed
)

// wait queues c's subscription to ch until the bus confirms ch, and reports true; false
// means ch is confirmed already and the caller enters c at once.
func (h *Hub) wait(c *Conn, ch *Channel, member herald.Member) (*waiter, bool) {
	b := ch.bus
	if b.ready.Load() {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ready.Load() {
		return nil, false
	}
	w := &waiter{c: c, member: member}
	b.waiting = append(b.waiting, w)
	return w, true
}

// confirmAll enters every subscription waiting for ch, now that the bus has it; those a
// full presence channel refuses get their subscription_error and give their reference back.
func (h *Hub) confirmAll(a *appState, ch *Channel) {
	var refused []*waiter
	b := ch.bus
	b.mu.Lock()
	b.ready.Store(true)
	for _, w := range b.waiting {
		if !h.confirm(ch, w) {
			refused = append(refused, w)
		}
	}
	b.waiting = nil
	b.mu.Unlock()
	for _, w := range refused {
		h.forget(a, ch)
		h.subError(w.c, ch.name, "LimitReached", "presence channel is full", 4100)
	}
}

// confirm enters a waiting subscription now that the bus has its channel, and reports
// false when the channel refused it (the caller then gives its reference back). Called with
// ch.bus.mu held, so the connection's read side sees it either waiting or settled.
func (h *Hub) confirm(ch *Channel, w *waiter) bool {
	if w.state.Load() != waiting {
		return true
	}
	if h.enter(w.c, ch, w.member) {
		w.state.Store(joined)
		w.member.Info = nil // the presence channel has it; the subscription keeps the id
		return true
	}
	w.state.Store(failed)
	return false
}

// settle ends a subscription that may still be waiting, as its connection leaves it. It
// reports whether the subscription had entered its channel: when not, it held only its
// reference to the channel, which settle gives back.
func (h *Hub) settle(c *Conn, s sub) (entered bool) {
	w, b := s.w, s.ch.bus
	if w == nil || b == nil {
		return true
	}
	b.mu.Lock()
	st := w.state.Load()
	if st == waiting {
		w.state.Store(cancelled)
		for i, x := range b.waiting {
			if x == w {
				b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
				break
			}
		}
	}
	b.mu.Unlock()
	switch st {
	case waiting:
		h.forget(c.app, s.ch)
		return false
	case joined:
		return true
	}
	return false // failed: confirm gave its reference back
}
