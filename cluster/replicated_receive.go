package cluster

import (
	"time"

	"github.com/herald-rt/herald"
)

// What a cluster node receives from the bus, by kind (NewReplicated routes each here):
// events (BusEvent, BusBundle; a history channel's go on in history_sequence.go), cache
// channels' events (BusCache), the other nodes' state (BusState, the stream) and user
// terminations (BusTerminate).

// receiveEvent delivers an event another node (or this one) published to this node's
// subscribers of its channel, except the socket it excludes (when that socket is here).
// Messages of unknown apps, and for channels nobody here subscribes to any more, are
// ignored. Cache channels' events come as BusCache.
func (r *Replicated) receiveEvent(msg herald.BusMessage) {
	if !r.validFrame(msg.Payload) {
		return
	}
	a := r.app(msg.App)
	if a == nil {
		return
	}
	if msg.Offset != 0 {
		r.receiveHistory(a, msg)
		return
	}
	if msg.Key != "" && r.received.repeat(a.id, msg.Channel, msg.Key, time.Now()) {
		return // delivered when its key first came
	}
	// Events of channels without history wait in the batch for the bus to drain; a history
	// channel's are delivered at once, in the order its history lock gives them with
	// replays and repairs.
	ch := a.table.lookup(msg.Channel)
	if ch != nil && ch.hist == nil && (r.copies || len(a.hist.rules()) == 0) {
		r.batch.Add(&ch.Channel, msg.Payload, r.eng.Local(msg.ExcludeSocket), a.group.Measure(msg.Origin))
		return
	}
	r.deliver(a, msg.Channel, false, msg.Payload, r.eng.Local(msg.ExcludeSocket), nil, msg.Origin)
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

// receiveCache keeps and delivers a cache channel's event.
func (r *Replicated) receiveCache(msg herald.BusMessage) {
	rd := stateReader{b: msg.Payload}
	app, channel := rd.string(), rd.string()
	if a := r.app(app); a != nil && rd.err == nil && herald.Classify(channel).Cache && r.validFrame(rd.b) {
		r.deliver(a, channel, true, rd.b, r.eng.Local(msg.ExcludeSocket), nil, msg.Origin)
		r.echo.arrived(app, channel, rd.b)
	}
}

// validFrame reports whether frame may be queued for subscribers (Config.ValidFrame).
func (r *Replicated) validFrame(frame []byte) bool {
	return r.cfg.ValidFrame == nil || r.cfg.ValidFrame(frame)
}

// receiveState applies the other nodes' state.
func (r *Replicated) receiveState(msg herald.BusMessage) { r.stream.receive(msg.Node, msg.Payload) }

// receiveTerminate closes a user's connections here.
func (r *Replicated) receiveTerminate(msg herald.BusMessage) {
	rd := stateReader{b: msg.Payload}
	app, user := rd.string(), rd.string()
	if rd.err == nil && r.app(app) != nil {
		r.l.Terminate(app, user)
	}
}
