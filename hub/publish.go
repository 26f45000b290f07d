package hub

import (
	"strconv"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// Publish delivers each of evs to every subscriber of its channel on this node (in a
// cluster: on every node, see busPublish) except the connection named by its SocketID. Each event is encoded once into one frame that all its
// recipients share. It is all or nothing: it returns a CodeBusy error when the fan-out queues
// it needs stay full for the publish timeout, and then has delivered none of evs to anyone
// (nor kept any in a cache channel), so the caller answers 503 and the publisher retries
// without duplicating a thing.
func (f *core) Publish(appID string, evs ...herald.Event) error {
	a := f.apps[appID]
	if a == nil {
		return herald.Errorf(herald.CodeAppNotFound, "app %q does not exist", appID)
	}
	var oneFrame [1][]byte
	frames := oneFrame[:]
	if len(evs) > 1 {
		frames = make([][]byte, len(evs))
	}
	for i := range evs {
		frames[i] = eventFrame(evs[i])
	}
	if f.bus != nil {
		err := f.busPublish(a, evs, frames)
		if err == nil && a.wants(herald.APIEvent) {
			f.apiEvents(a, evs)
		}
		return err
	}
	// Per-worker slot counts; on the stack for up to 16 workers.
	var wantBuf, heldBuf [16]int32
	want, held := wantBuf[:], heldBuf[:]
	if n := len(f.workers); n <= len(wantBuf) {
		want, held = want[:n], held[:n]
	} else {
		want, held = make([]int32, n), make([]int32, n)
	}
	if err := f.reserve(a, evs, want, held); err != nil {
		return err
	}
	for i := range evs {
		f.publish(a, evs[i].Channel, frames[i], parseSocketID(f.prefix, evs[i].SocketID), held, originNanos(evs[i]))
	}
	f.release(held) // what subscribers who left meanwhile did not use
	if a.wants(herald.APIEvent) {
		f.apiEvents(a, evs)
	}
	return nil
}

// eventFrame encodes ev as one complete WebSocket text frame with a single allocation.
func eventFrame(ev herald.Event) []byte {
	buf := make([]byte, ws.MaxHeader, ws.MaxHeader+48+len(ev.Name)+len(ev.Channel)+len(ev.UserID)+len(ev.Data)+len(ev.Data)/8)
	buf = pusher.AppendEvent(buf, ev.Name, ev.Channel, ev.Data, ev.UserID)
	return ws.FrameInPlace(buf, ws.OpText)
}

// reserve takes, in each worker, one slot of its publish queue (worker.slots) per event of
// evs whose channel has subscribers there (at most the queue's size), waiting up to the
// publish timeout in all for room; held[i] counts the slots taken in worker i. It takes all
// of them or, returning a CodeBusy error, none. Every publisher takes workers in index order,
// so publishers that wait for slots another holds never wait in a cycle.
func (f *core) reserve(a *appState, evs []herald.Event, want, held []int32) error {
	for j := range evs {
		ch := a.channels.lookup(evs[j].Channel)
		if ch == nil {
			continue
		}
		for i := range want {
			if ch.wcount[i].Load() > 0 {
				want[i]++
			}
		}
	}
	var t *time.Timer
	for i, w := range f.workers {
		for n := min(want[i], int32(cap(w.slots))); held[i] < n; {
			select {
			case w.slots <- struct{}{}:
				held[i]++
				continue
			default:
			}
			if t == nil {
				t = time.NewTimer(f.cfg.PublishTimeout)
			}
			select {
			case w.slots <- struct{}{}:
				held[i]++
			case <-t.C:
				f.release(held)
				return herald.Errorf(herald.CodeBusy, "fan-out queues are full, retry later")
			}
		}
	}
	if t != nil {
		t.Stop()
	}
	return nil
}

// release gives back the publish queue slots counted in held and zeroes it.
func (f *core) release(held []int32) {
	for i, n := range held {
		for ; n > 0; n-- {
			<-f.workers[i].slots
		}
		held[i] = 0
	}
}

// originNanos is ev's origin in Unix nanoseconds, 0 when it has none or one not after 1970
// (a Kafka record without a timestamp says -1 ms).
func originNanos(ev herald.Event) int64 {
	if ev.Origin.IsZero() {
		return 0
	}
	return max(ev.Origin.UnixNano(), 0)
}

// publish sends frame to channel name's subscribers; cache channels also keep it. held, when
// not nil, are the slots reserved for it (see dispatch); origin, when not 0, is the event's
// origin in Unix nanoseconds (herald.Event.Origin).
func (f *core) publish(a *appState, name string, frame []byte, excl uint64, held []int32, origin int64) {
	m := measure{lat: &a.lat}
	if a.lat.origin != nil {
		m.at = origin
	}
	if herald.Classify(name).Cache {
		a.cache.with(name, f.now(), func([]byte) []byte {
			if ch := a.channels.lookup(name); ch != nil {
				f.dispatch(ch, frame, excl, held, m)
			}
			return frame
		})
		return
	}
	if ch := a.channels.lookup(name); ch != nil {
		f.dispatch(ch, frame, excl, held, m)
	}
}

// dispatch sends one publish command to each worker that has subscribers of ch. A command
// to worker i uses one of the slots held[i] reserved for it while there is one (held may be
// nil); without (a subscriber arrived after the reservation, or a client event or presence
// change, which never fail) the send waits for room, which a worker always makes. m says
// what to observe once the last worker has queued the frame for its subscribers.
func (f *core) dispatch(ch *Channel, frame []byte, excl uint64, held []int32, m measure) {
	var track *pubTrack
	if m.lat != nil && (m.lat.publish != nil || m.at != 0) {
		n := int32(0)
		for i := range f.workers {
			if ch.wcount[i].Load() > 0 {
				n++
			}
		}
		if n == 0 {
			return
		}
		track = &pubTrack{start: mono(), measure: m}
		track.left.Store(n)
	}
	for i, w := range f.workers {
		if ch.wcount[i].Load() <= 0 {
			continue
		}
		c := cmd{op: opPublish, ch: ch, frame: frame, excl: excl, track: track}
		if held != nil && held[i] > 0 {
			held[i]--
			c.slot = true
		}
		w.inbox <- c
	}
}

// clientEvent forwards a client-* event to the other subscribers of a private or presence
// channel the sender has joined.
func (h *Hub) clientEvent(c *Conn, m pusher.Message) {
	a := c.app
	lim := a.app.Limits
	if !a.app.EnableClientMessages {
		h.sendError(c, herald.CodeClientEventDenied, "client events are not enabled for this app")
		return
	}
	if err := pusher.ValidateEventName(m.Event, lim.MaxEventNameLength); err != nil {
		h.sendError(c, herald.CodeClientEventDenied, herald.MessageOf(err))
		return
	}
	i := c.subIndex(m.Channel)
	if i < 0 {
		h.sendError(c, herald.CodeClientEventDenied, "client event rejected: not subscribed to channel "+m.Channel)
		return
	}
	s := c.subs[i]
	if !s.confirmed() {
		h.sendError(c, herald.CodeClientEventDenied, "client event rejected: the subscription to "+m.Channel+" is not confirmed yet")
		return
	}
	if k := s.ch.info.Kind; k != herald.Private && k != herald.Presence {
		h.sendError(c, herald.CodeClientEventDenied, "client events are only supported on private and presence channels")
		return
	}
	data := m.DataString()
	if pusher.ValidateEventData(data, lim.MaxEventPayloadBytes) != nil {
		h.sendError(c, herald.CodeTooLarge, "client event data is too large")
		return
	}
	if ok, _ := c.events.Take(a.events, h.now()*1e6); !ok {
		c.m.eventsLimited.Add(1)
		h.sendError(c, herald.CodeRateLimited, "client event rejected: over the rate limit of "+
			strconv.Itoa(lim.MaxClientEventsPerSecond)+" events per second")
		return
	}
	ev := herald.Event{Name: m.Event, Channel: m.Channel, Data: data, UserID: s.userID()}
	frame := eventFrame(ev)
	if a.wants(herald.ClientEvent) {
		a.emit(&herald.Activity{Kind: herald.ClientEvent, Channel: m.Channel, Event: m.Event, Data: data, SocketID: c.sid, UserID: ev.UserID})
	}
	if h.bus != nil && h.busForward(a, m.Channel, c.sid, frame) {
		return // delivered here too when the bus brings it back
	}
	h.publish(a, m.Channel, frame, c.num, nil, 0)
}
