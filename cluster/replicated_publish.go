package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// A cluster node's publish, in the order PublishBatch takes it:
//
//  1. refused at once while the bus is down, or while this node or another live one is
//     behind (behind, pressure.go);
//  2. the events' idempotency keys claimed: repeats of publishes that succeeded are left out
//     (keys.go), and the keys settled when the publish ends;
//  3. each event sent (publishEvent): a history channel's to the bus's store, which gives it
//     its position; any other's to the bus; runs of one channel's events as bundles while
//     every node reads them (bundleGroups, publishBundle, bundle.go); a cache channel's
//     expected back from the bus (echo.go);
//  4. the bus flushed, and the cache channels' events waited for;
//  5. a failure made one the publisher may retry, or must not (unkept).
//
// The bus brings every event back to every node with interest in its channel, this one
// included (replicated_receive.go).

// Publish implements State, as PublishBatch.
func (r *Replicated) Publish(a *App, ev herald.Event, frame []byte) error {
	evs, frames := [1]herald.Event{ev}, [1][]byte{frame}
	return r.PublishBatch(a, evs[:], frames[:])
}

// PublishBatch implements State: it sends the frames of evs through the bus to every node with
// interest in their channels, this one included, so every node delivers one channel's
// events in the one order the bus gave them; then it waits until the bus has them (Flush),
// so that a publisher whose next event goes to another node keeps its order there too. It
// fails at once with a CodeUnavailable error when the bus is known to be down (nothing was
// sent); a later error means the events before it were handed to the bus (the caller
// answers 503): a retry delivers those again unless they carry idempotency keys, which the
// history store keeps across nodes and this node's keys remember (docs/guarantees.md). An event of a cache channel is
// answered once it is back from the bus and kept here (echoes), so that a subscriber who
// joins this node after the answer gets it replayed; waiting for that is bounded by the
// publish timeout, after which the answer is given all the same (the bus has the event).
//
// Local subscribers are served from the bus like the others: the fan-out queues push back on
// the broker's delivery, not on the publisher, who is refused only when the bus is.
func (r *Replicated) PublishBatch(a *App, evs []herald.Event, frames [][]byte) (err error) {
	if !r.bus.Connected() {
		return herald.Errorf(herald.CodeUnavailable, "the cluster bus is unreachable, retry later")
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.PublishTimeout)
	defer cancel()
	if err := r.behind(); err != nil {
		return err
	}
	skip, held, err := r.keys.claim(r.cfg.PublishTimeout, a.id, evs)
	if err != nil {
		return err
	}
	defer func() {
		err = unkept(err)
		if held != nil {
			r.keys.settle(a.id, held, err == nil)
		}
	}()
	if skip != nil {
		evs, frames = unskipped(evs, frames, skip)
	}
	var waits []*echoWait            // the cache channels' events, until they are back
	groups := r.bundleGroups(a, evs) // nil: none goes in a bundle
	for i := range evs {
		if groups != nil && groups[i] >= 0 {
			if groups[i] == i { // the first of its bundle sends the bundle
				if err := r.publishBundle(ctx, a, evs, frames, groups, i); err != nil {
					return err
				}
			}
			continue
		}
		cache := herald.Classify(evs[i].Channel).Cache
		if cache {
			waits = append(waits, r.echo.expect(a.id, evs[i].Channel, frames[i]))
		}
		if err := r.publishEvent(ctx, a, &evs[i], cache, frames[i]); err != nil {
			r.echo.cancel(waits)
			return err
		}
	}
	if err := r.bus.Flush(ctx); err != nil {
		r.echo.cancel(waits)
		return err
	}
	if len(waits) > 0 && !r.echo.wait(waits, r.cfg.PublishTimeout) {
		r.log.Debug("cluster: a cache-channel event came back from the bus after its publish was answered", "app_id", a.id)
	}
	return nil
}

// behind is the refusal of a publish while this node or another live one is behind
// (pressure.go): nil when none is.
func (r *Replicated) behind() error {
	if r.press.behind.Load() {
		r.press.refused.Add(1)
		return herald.Errorf(herald.CodeBusy, "this node cannot keep up with the events it receives (its fan-out queues are full): retry later")
	}
	if name := r.stream.behindPeer(); name != nil {
		r.press.refused.Add(1)
		return herald.Errorf(herald.CodeBusy, "node %s cannot keep up with the events it receives (its fan-out queues are full): retry later", *name)
	}
	return nil
}

// unskipped returns the events of evs, and their frames, that skip does not mark.
func unskipped(evs []herald.Event, frames [][]byte, skip []bool) ([]herald.Event, [][]byte) {
	var e []herald.Event
	var f [][]byte
	for i := range evs {
		if !skip[i] {
			e, f = append(e, evs[i]), append(f, frames[i])
		}
	}
	return e, f
}

// publishEvent sends one event: a history channel's to the bus's store, which gives it its
// position and keeps its key once across nodes; any other's to the bus, with its key while
// every node reads keys (received.go), but a cache channel's (a BusCache to every node).
func (r *Replicated) publishEvent(ctx context.Context, a *App, ev *herald.Event, cache bool, frame []byte) error {
	msg := busEvent(a.id, ev.Channel, cache, ev.SocketID, frame, ev.OriginNanos())
	rule, kept := a.hist.rule(ev.Channel)
	kept = kept && r.hist != nil
	if kept || !cache && r.Features()&FeatureKeys != 0 {
		msg.Key = ev.Key // the store keeps it once, or every node reads it (received.go)
	}
	if kept {
		_, err := r.hist.Publish(ctx, rule, msg)
		return err
	}
	return r.bus.Publish(ctx, msg)
}

// bundleGroups returns, for each event of evs that goes in a bundle, the index of the first
// event of its bundle (-1 for the others): each run of two or more consecutive events of one
// channel, neither history nor cache, without idempotency keys (a bundle carries none). Only
// consecutive ones, so that a subscriber of several of the channels still gets the call's
// events in its order. nil when none does, or when this node sends no bundles now
// (Config.NoBundles, or a live node that does not read them).
func (r *Replicated) bundleGroups(a *App, evs []herald.Event) []int {
	if len(evs) < 2 || r.cfg.NoBundles || r.Features()&FeatureBundles == 0 {
		return nil
	}
	groups := make([]int, len(evs))
	any := false
	for i := 0; i < len(evs); {
		ch, keyed := evs[i].Channel, evs[i].Key != ""
		j := i + 1
		for j < len(evs) && evs[j].Channel == ch && (evs[j].Key != "") == keyed {
			j++
		}
		_, hist := a.hist.rule(ch)
		ok := j-i >= 2 && !keyed && !herald.Classify(ch).Cache && !(hist && r.hist != nil)
		for k := i; k < j; k++ {
			groups[k] = -1
			if ok {
				groups[k], any = i, true
			}
		}
		i = j
	}
	if !any {
		return nil
	}
	return groups
}

// publishBundle publishes the events of evs whose group is g (the index of the first), in
// bundles of at most maxBundle bytes (an event alone goes as a BusEvent).
func (r *Replicated) publishBundle(ctx context.Context, a *App, evs []herald.Event, frames [][]byte, groups []int, g int) error {
	var payload []byte
	n, last := 0, -1
	flush := func() error {
		var err error
		switch n {
		case 0:
			return nil
		case 1:
			ev := &evs[last]
			err = r.bus.Publish(ctx, busEvent(a.id, ev.Channel, false, ev.SocketID, frames[last], ev.OriginNanos()))
		default:
			err = r.bus.Publish(ctx, herald.BusMessage{Kind: herald.BusBundle, App: a.id, Channel: evs[g].Channel, Payload: payload})
			if err == nil {
				r.bundles.sent.Add(1)
				r.bundles.events.Add(uint64(n))
			}
		}
		payload, n = nil, 0
		return err
	}
	for i := g; i < len(evs) && groups[i] == g; i++ {
		size := binary.MaxVarintLen64*3 + len(evs[i].SocketID) + len(frames[i])
		if n > 0 && len(payload)+size > maxBundle {
			if err := flush(); err != nil {
				return err
			}
		}
		payload = appendBundled(payload, evs[i].SocketID, evs[i].OriginNanos(), frames[i])
		n, last = n+1, i
	}
	return flush()
}

// busEvent is the bus message of an event's frame: to the nodes with interest in its
// channel or, for a cache channel, to every node, so that each keeps it as the channel's
// last event. origin (Unix nanoseconds, 0: none) travels with it, so that each node that
// delivers it observes origin → its frames queued.
func busEvent(app, channel string, cache bool, exclude string, frame []byte, origin int64) herald.BusMessage {
	if cache {
		p := appendString(appendString(make([]byte, 0, len(app)+len(channel)+4+len(frame)), app), channel)
		return herald.BusMessage{Kind: herald.BusCache, Channel: cacheKey, ExcludeSocket: exclude, Origin: origin, Payload: append(p, frame...)}
	}
	return herald.BusMessage{Kind: herald.BusEvent, App: app, Channel: channel, ExcludeSocket: exclude, Origin: origin, Payload: frame}
}

// unkept is the error of a publish that the bus did not confirm: every failure is one the
// publisher may retry (CodeBusy, CodeUnavailable), or one it must not (an event too large),
// never an internal error for a deadline the bus let pass.
func unkept(err error) error {
	if err == nil || herald.CodeOf(err) != herald.CodeInternal {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", herald.Errorf(herald.CodeBusy, "the cluster bus did not confirm the publish within the publish timeout, retry later"), err)
	}
	return fmt.Errorf("%w: %w", herald.Errorf(herald.CodeUnavailable, "the cluster bus failed the publish, retry later"), err)
}

// Forward implements State: the frame goes through the bus, to this node's subscribers too.
// Client events are never refused: while the bus is down, this node's subscribers get it.
func (r *Replicated) Forward(a *App, channel string, from *fanout.Conn, frame []byte) {
	cache := herald.Classify(channel).Cache
	if r.bus.Connected() && r.bus.Publish(context.Background(), busEvent(a.id, channel, cache, from.ID(), frame, 0)) == nil {
		return // delivered here too when the bus brings it back
	}
	r.deliver(a, channel, cache, frame, from.Num(), nil, 0)
}

// Terminate implements State: every node closes the connections of the signed-in user.
func (r *Replicated) Terminate(a *App, user string) {
	p := appendString(appendString(nil, a.id), user)
	_ = r.bus.Publish(context.Background(), herald.BusMessage{Kind: herald.BusTerminate, Channel: controlKey, Payload: p})
}
