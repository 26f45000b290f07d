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
func (f *core) UseBroker(b herald.Broker) {
	f.bus = b
	ctx, cancel := context.WithCancel(context.Background())
	f.busOps = &busOps{ctx: ctx, cancel: cancel}
	f.state = newClusterState(f)
	for _, a := range f.apps {
		a.channels.clustered = true
		a.channels.pres = newPresenceTable()
	}
	// Interest in the internal keys before any client or publish: kept by the engine, and
	// restored when the bus comes back, even when the bus is unreachable now.
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	for _, k := range []string{stateKey, cacheKey, controlKey} {
		_ = b.Subscribe(sctx, "", k)
	}
	scancel()
	f.busOps.run(f.state.run)
}

// Internal bus keys (app id ""): every node has interest in them.
const (
	cacheKey   = "cache"   // BusCache: cache channels' events, kept by every node
	controlKey = "control" // BusTerminate
)

// Receive is the herald.BusHandler of the hub's broker: it delivers a message another node
// (or this one) published to this node's subscribers of its channel, except the socket it
// excludes (when that socket is here), and applies the other nodes' state. Messages of
// unknown kinds or apps, and for channels nobody here subscribes to any more, are ignored.
func (f *core) Receive(msg herald.BusMessage) {
	switch msg.Kind {
	case herald.BusEvent:
		if a := f.apps[msg.App]; a != nil {
			f.publish(a, msg.Channel, msg.Payload, parseSocketID(f.prefix, msg.ExcludeSocket), nil, msg.Origin)
		}
	case herald.BusState:
		f.state.receive(msg.Node, msg.Payload)
	case herald.BusCache:
		r := stateReader{b: msg.Payload}
		app, channel := r.string(), r.string()
		if a := f.apps[app]; a != nil && r.err == nil && herald.Classify(channel).Cache {
			f.publish(a, channel, r.b, parseSocketID(f.prefix, msg.ExcludeSocket), nil, msg.Origin)
			f.echo.arrived(app, channel, r.b)
		}
	case herald.BusTerminate:
		r := stateReader{b: msg.Payload}
		app, user := r.string(), r.string()
		if r.err == nil && f.terminate != nil {
			f.terminate(app, user)
		}
	}
}

// busPublish is Publish in a cluster: it sends the frames of evs through the bus to every
// node with interest in their channels, this one included, so every node delivers one
// channel's events in the one order the bus gave them; then it waits until the bus has
// them (Flush), so that a publisher whose next event goes to another node keeps its order
// there too. It fails at once with a CodeUnavailable error when the bus is known to be down
// (nothing was sent); a later error means the events before it were handed to the bus (the
// caller answers 503, and a retry may deliver those twice). An event of a cache channel is
// answered once it is back from the bus and kept here (echoes), so that a subscriber who
// joins this node after the answer gets it replayed; waiting for that is bounded by the
// publish timeout, after which the answer is given all the same (the bus has the event).
//
// Local subscribers are served from the bus like the others: the fan-out queues push back on
// the broker's delivery, not on the publisher, who is refused only when the bus is.
func (f *core) busPublish(a *appState, evs []herald.Event, frames [][]byte) error {
	if !f.bus.Connected() {
		return herald.Errorf(herald.CodeUnavailable, "the cluster bus is unreachable, retry later")
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.PublishTimeout)
	defer cancel()
	var waits []*echoWait
	for i := range evs {
		if herald.Classify(evs[i].Channel).Cache {
			waits = append(waits, f.echo.expect(a.app.ID, evs[i].Channel, frames[i]))
		}
		if err := f.bus.Publish(ctx, busEvent(a.app.ID, evs[i].Channel, evs[i].SocketID, frames[i], originNanos(evs[i]))); err != nil {
			f.echo.cancel(waits)
			return err
		}
	}
	if err := f.bus.Flush(ctx); err != nil {
		f.echo.cancel(waits)
		return err
	}
	if len(waits) > 0 && !f.echo.wait(waits, f.cfg.PublishTimeout) {
		f.log.Debug("cluster: a cache-channel event came back from the bus after its publish was answered", "app_id", a.app.ID)
	}
	return nil
}

// busForward sends a client event's frame through the bus, to this node's subscribers too,
// and reports whether it did. Client events are never refused: while the bus is down, the
// caller delivers to this node's subscribers only.
func (f *core) busForward(a *appState, channel, from string, frame []byte) bool {
	if !f.bus.Connected() {
		return false
	}
	return f.bus.Publish(context.Background(), busEvent(a.app.ID, channel, from, frame, 0)) == nil
}

// busEvent is the bus message of an event's frame: to the nodes with interest in its
// channel or, for a cache channel, to every node, so that each keeps it as the channel's
// last event. origin (Unix nanoseconds, 0: none) travels with it, so that each node that
// delivers it observes origin → its frames queued.
func busEvent(app, channel, exclude string, frame []byte, origin int64) herald.BusMessage {
	if herald.Classify(channel).Cache {
		p := appendString(appendString(make([]byte, 0, len(app)+len(channel)+4+len(frame)), app), channel)
		return herald.BusMessage{Kind: herald.BusCache, Channel: cacheKey, ExcludeSocket: exclude, Origin: origin, Payload: append(p, frame...)}
	}
	return herald.BusMessage{Kind: herald.BusEvent, App: app, Channel: channel, ExcludeSocket: exclude, Origin: origin, Payload: frame}
}

// busTerminate asks every node to close the connections of a signed-in user.
func (f *core) busTerminate(app, user string) {
	p := appendString(appendString(nil, app), user)
	_ = f.bus.Publish(context.Background(), herald.BusMessage{Kind: herald.BusTerminate, Channel: controlKey, Payload: p})
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

// takeInterest takes this node's interest in a channel just created, then calls confirmed.
// While the bus is down it retries until the bus is back, or until the channel is forgotten
// or the hub shuts down (then confirmed is never called).
func (f *core) takeInterest(a *appState, ch *Channel, confirmed func()) {
	f.busOps.run(func(ctx context.Context) {
		app, name, b := a.app.ID, ch.name, ch.bus
		err := f.bus.Subscribe(ctx, app, name)
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
			err = f.bus.Subscribe(ctx, app, name)
			_ = f.bus.Unsubscribe(ctx, app, name)
		}
		b.mu.Lock()
		b.held = true
		gone := b.gone
		b.mu.Unlock()
		if gone {
			f.dropInterest(ctx, app, name)
			return
		}
		if err == nil {
			confirmed()
		}
	})
}

// forget drops one subscription's reference to ch; the last one forgets the channel and, in
// a cluster, drops this node's interest in it.
func (f *core) forget(a *appState, ch *Channel) {
	if !a.channels.release(ch) {
		f.subsChanged(a, ch.name, 0)
		return
	}
	f.subsChanged(a, ch.name, -1)
	if ch.presence != nil && a.channels.pres != nil {
		a.channels.pres.unhold(ch.presence, ch)
	}
	if ch.bus == nil {
		return
	}
	b := ch.bus
	b.mu.Lock()
	b.gone = true
	held := b.held
	b.mu.Unlock()
	if held {
		app, name := a.app.ID, ch.name
		f.busOps.run(func(ctx context.Context) { f.dropInterest(ctx, app, name) })
	}
}

func (f *core) dropInterest(ctx context.Context, app, name string) {
	_ = f.bus.Unsubscribe(ctx, app, name)
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
