package cluster

import (
	"sync"
	"sync/atomic"
)

// Gate holds back the subscriptions to a channel until the node's interest in it is on the
// bus, so that no subscriber misses an event another node publishes after its
// subscription_succeeded. On a single node, and for cache channels (whose events reach every
// node), it is open from the start and nothing waits.
type Gate struct {
	mu      sync.Mutex
	ready   atomic.Bool // open: subscriptions enter at once
	waiting []Waiter
	held    bool // the bus confirmed the interest (or gave up): the reference is ours to drop
	gone    bool // the channel was released: drop the reference once held
}

// Waiter is a subscription waiting at a gate.
type Waiter interface {
	// Enter enters the subscription now that the gate opens; it is called once, holding
	// the gate, and reports false when the channel refused it (a full presence channel).
	Enter() bool
	// Refused follows a false Enter, once the gate is no longer held: the subscription
	// gives back its reference to the channel and tells its client.
	Refused()
}

// Open reports whether the gate is open: a subscription enters at once, and every one that
// waited has entered (or been refused).
func (g *Gate) Open() bool { return g.ready.Load() }

// Wait queues w until the gate opens and reports true; false means the gate is open and the
// caller enters w at once.
func (g *Gate) Wait(w Waiter) bool {
	if g.ready.Load() {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ready.Load() {
		return false
	}
	g.waiting = append(g.waiting, w)
	return true
}

// Cancel withdraws w if it is still waiting and reports whether it was. When it reports
// false, w's Enter has run (or never will, w having never waited).
func (g *Gate) Cancel(w Waiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, x := range g.waiting {
		if x == w {
			g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// open opens the gate and enters every waiting subscription; those refused are told after.
func (g *Gate) open() {
	var refused []Waiter
	g.mu.Lock()
	for _, w := range g.waiting {
		if !w.Enter() {
			refused = append(refused, w)
		}
	}
	g.waiting = nil
	g.ready.Store(true)
	g.mu.Unlock()
	for _, w := range refused {
		w.Refused()
	}
}
