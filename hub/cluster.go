package hub

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
)

// This file is where the cluster bus plugs into the hub, and the only one that calls it:
//
//   - a channel's first local subscriber takes this node's interest in it on the bus
//     (busInterest.start), and its subscribers are confirmed only once the bus has it, so no
//     subscriber misses an event another node publishes after its subscription_succeeded;
//   - its last local subscriber leaving drops the interest (busInterest.stop);
//   - events published here go to the bus as well as to local subscribers (busPublish);
//   - what other nodes publish arrives in Receive and is delivered like a local publish.
//
// With no broker (a single node) Channel.bus is nil and none of this runs.

// UseBroker connects the hub to a cluster bus built with h.Receive as its handler. Call it
// once, after New and before the hub serves any connection or publish. Without it the hub is
// a single node and nothing of the cluster is on its paths.
func (h *Hub) UseBroker(b herald.Broker) {
	h.bus = b
	ctx, cancel := context.WithCancel(context.Background())
	h.busOps = &busOps{ctx: ctx, cancel: cancel}
	for _, a := range h.apps {
		a.channels.clustered = true
	}
}

// Receive is the herald.BusHandler of the hub's broker: it delivers a message another node
// published to this node's subscribers of its channel, except the socket it excludes (when
// that socket is here). Messages of unknown kinds or apps, and for channels nobody here
// subscribes to any more, are ignored.
func (h *Hub) Receive(msg herald.BusMessage) {
	if msg.Kind != herald.BusEvent {
		return
	}
	a := h.apps[msg.App]
	if a == nil {
		return
	}
	h.publish(a, msg.Channel, msg.Payload, parseSocketID(h.prefix, msg.ExcludeSocket), nil)
}

// busPublish is Publish in a cluster: it sends the frames of evs through the bus to every
// node with interest in their channels, this one included, so every node delivers one
// channel's events in the one order the bus gave them; then it waits until the bus has
// them (Flush), so that a publisher whose next event goes to another node keeps its order
// there too. It fails at once with a CodeUnavailable error when the bus is known to be down
// (nothing was sent); a later error means the events before it were handed to the bus (the
// caller answers 503, and a retry may deliver those twice).
//
// Local subscribers are served from the bus like the others: the fan-out queues push back on
// the broker's delivery, not on the publisher, who is refused only when the bus is.
func (h *Hub) busPublish(a *appState, evs []herald.Event, frames [][]byte) error {
	if !h.bus.Connected() {
		return herald.Errorf(herald.CodeUnavailable, "the cluster bus is unreachable, retry later")
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.PublishTimeout)
	defer cancel()
	for i := range evs {
		name := evs[i].Channel
		if herald.Classify(name).Cache {
			// The bus brings the event back only while this node has interest in the
			// channel; a later subscriber here must find it all the same.
			if ch := a.channels.lookup(name); ch == nil || !ch.bus.ready.Load() {
				a.cache.with(name, h.now(), func([]byte) []byte { return frames[i] })
			}
		}
		err := h.bus.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: a.app.ID, Channel: name,
			ExcludeSocket: evs[i].SocketID, Payload: frames[i]})
		if err != nil {
			return err
		}
	}
	return h.bus.Flush(ctx)
}

// busForward sends a client event's frame through the bus, to this node's subscribers too,
// and reports whether it did. Client events are never refused: while the bus is down, the
// caller delivers to this node's subscribers only.
func (h *Hub) busForward(a *appState, channel, from string, frame []byte) bool {
	if !h.bus.Connected() {
		return false
	}
	err := h.bus.Publish(context.Background(), herald.BusMessage{Kind: herald.BusEvent, App: a.app.ID, Channel: channel,
		ExcludeSocket: from, Payload: frame})
	return err == nil
}

// busInterest is one Channel's interest on the bus. The Channel takes it when created and
// drops it when forgotten; subscriptions made before the bus confirmed it wait in waiting.
type busInterest struct {
	mu      sync.Mutex
	ready   atomic.Bool // the bus confirmed the interest: subscribers are confirmed at once
	waiting []*waiter
	held    bool // Subscribe returned: the reference is ours to drop
	gone    bool // the channel was forgotten: drop the reference once held
}

// waiter is a subscription waiting for its channel's interest on the bus. Its state changes
// under busInterest.mu; its connection's read side reads it without the lock.
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

// startInterest takes this node's interest in a channel just created, then confirms its
// waiting subscribers. While the bus is down it retries until the bus is back (the
// subscribers wait), or until the channel is forgotten or the hub shuts down.
func (h *Hub) startInterest(a *appState, ch *Channel) {
	h.busOps.run(func(ctx context.Context) {
		app, name, b := a.app.ID, ch.name, ch.bus
		err := h.bus.Subscribe(ctx, app, name)
		for n := 0; err != nil; n++ {
			// The reference taken above is kept and restored by the engine when the bus
			// returns; an extra one, taken and dropped, tells when it is confirmed.
			select {
			case <-time.After(broker.Backoff(50*time.Millisecond, time.Second, n)):
			case <-ctx.Done():
			}
			b.mu.Lock()
			gone := b.gone || ctx.Err() != nil
			b.mu.Unlock()
			if gone {
				break
			}
			err = h.bus.Subscribe(ctx, app, name)
			_ = h.bus.Unsubscribe(ctx, app, name)
		}
		var refused []*waiter
		b.mu.Lock()
		b.held = true
		gone := b.gone
		if err == nil && !gone {
			b.ready.Store(true)
			for _, w := range b.waiting {
				if !h.confirm(ch, w) {
					refused = append(refused, w)
				}
			}
			b.waiting = nil
		}
		b.mu.Unlock()
		for _, w := range refused {
			h.forget(a, ch)
			h.subError(w.c, name, "LimitReached", "presence channel is full", 4100)
		}
		if gone {
			h.dropInterest(ctx, app, name)
		}
	})
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
		return true
	}
	w.state.Store(failed)
	return false
}

// settle ends a subscription that may still be waiting, as its connection leaves it. It
// reports whether the subscription had entered its channel: when not, it held only its
// reference to the channel, which settle gives back.
func (h *Hub) settle(c *Conn, s sub) (entered bool) {
	w := s.wait
	if w == nil {
		return true
	}
	b := s.ch.bus
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

// forget drops one subscription's reference to ch; the last one forgets the channel and, in
// a cluster, drops this node's interest in it.
func (h *Hub) forget(a *appState, ch *Channel) {
	if !a.channels.release(ch) || ch.bus == nil {
		return
	}
	b := ch.bus
	b.mu.Lock()
	b.gone = true
	held := b.held
	b.mu.Unlock()
	if held {
		app, name := a.app.ID, ch.name
		h.busOps.run(func(ctx context.Context) { h.dropInterest(ctx, app, name) })
	}
}

func (h *Hub) dropInterest(ctx context.Context, app, name string) {
	_ = h.bus.Unsubscribe(ctx, app, name)
}

// busOps runs the hub's bus operations, one goroutine each, and stops them at shutdown.
type busOps struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// run starts f in a goroutine of its own, unless the hub has shut down.
func (o *busOps) run(f func(ctx context.Context)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		f(o.ctx)
	}()
}

// stop cancels the operations in flight and waits for them to return.
func (o *busOps) stop() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}
