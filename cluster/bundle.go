package cluster

import (
	"context"
	"encoding/binary"
	"sync/atomic"

	"github.com/herald-rt/herald"
)

// A bundle (herald.BusBundle) is several consecutive events of one channel, published in one
// call (a REST batch, a Kafka batch), sent as one bus message instead of one each: fewer messages for
// the bus to route and the nodes to read and unseal. Its payload is each event in publish
// order:
//
//	origin uvarint (Unix ns, 0: none), excluded socket string, frame string
//
// Only channels without history are bundled (a history channel's events keep one message
// and one position each) and not cache channels (each is a BusCache to every node), and
// only while every live node announces FeatureBundles: a node of v0.1.0 would drop them
// (it ignores kinds it does not know). Sealing (broker.Auth) covers a bundle as any message.

// maxBundle bounds a bundle's payload: a larger batch goes as several.
const maxBundle = 64 << 10

// bundleStats counts the bundles sent and received (ClusterStats).
type bundleStats struct {
	sent, events, received, bad atomic.Uint64
}

// bundling reports whether this node sends bundles now.
func (r *Replicated) bundling() bool {
	return !r.cfg.NoBundles && r.Features()&FeatureBundles != 0
}

// bundleGroups returns, for each event of evs that goes in a bundle, the index of the first
// event of its bundle (-1 for the others): each run of two or more consecutive events of one
// channel, neither history nor cache, without idempotency keys (a bundle carries none). Only
// consecutive ones, so that a subscriber of several
// of the channels still gets the call's events in its order.
func (r *Replicated) bundleGroups(a *App, evs []herald.Event) []int {
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

// appendBundled appends one event to a bundle's payload.
func appendBundled(b []byte, exclude string, origin int64, frame []byte) []byte {
	b = binary.AppendUvarint(b, uint64(max(origin, 0)))
	b = appendString(b, exclude)
	b = binary.AppendUvarint(b, uint64(len(frame)))
	return append(b, frame...)
}

// eachBundled calls f with each event of a bundle's payload, in order, after checking that
// the whole payload decodes (nothing is delivered of one that does not): false when not.
// frame aliases payload.
func eachBundled(payload []byte, f func(exclude []byte, origin int64, frame []byte)) bool {
	for pass := 0; pass < 2; pass++ {
		r := stateReader{b: payload}
		n := 0
		for r.err == nil && len(r.b) > 0 {
			origin := r.uvarint()
			exclude := r.bytes()
			frame := r.bytes()
			if r.err == nil && origin <= 1<<63-1 && pass == 1 {
				f(exclude, int64(origin), frame)
			}
			if origin > 1<<63-1 {
				r.err = errStateMalformed
			}
			n++
		}
		if r.err != nil || n == 0 {
			return false
		}
	}
	return true
}

// receiveBundle delivers a bundle's events in order, each as receiveEvent delivers one.
func (r *Replicated) receiveBundle(msg herald.BusMessage) {
	ok := eachBundled(msg.Payload, func(exclude []byte, origin int64, frame []byte) {
		r.receiveEvent(herald.BusMessage{Kind: herald.BusEvent, App: msg.App, Channel: msg.Channel, Node: msg.Node,
			ExcludeSocket: string(exclude), Origin: origin, Payload: frame})
	})
	if ok {
		r.bundles.received.Add(1)
	} else {
		r.bundles.bad.Add(1)
	}
}
