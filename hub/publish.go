package hub

import (
	"strconv"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// Publish delivers ev to every subscriber of ev.Channel on this node except the connection
// named by ev.SocketID. The event is encoded once into one frame that every recipient
// shares. It returns a CodeBusy error when the fan-out queues stay full for the publish
// timeout: the caller answers 503 and the publisher backs off.
func (h *Hub) Publish(appID string, ev herald.Event) error {
	a := h.apps[appID]
	if a == nil {
		return herald.Errorf(herald.CodeAppNotFound, "app %q does not exist", appID)
	}
	return h.publish(a, ev.Channel, eventFrame(ev), parseSocketID(h.prefix, ev.SocketID), true)
}

// eventFrame encodes ev as one complete WebSocket text frame with a single allocation.
func eventFrame(ev herald.Event) []byte {
	buf := make([]byte, ws.MaxHeader, ws.MaxHeader+48+len(ev.Name)+len(ev.Channel)+len(ev.UserID)+len(ev.Data)+len(ev.Data)/8)
	buf = pusher.AppendEvent(buf, ev.Name, ev.Channel, ev.Data, ev.UserID)
	return ws.FrameInPlace(buf, ws.OpText)
}

// publish sends frame to channel name's subscribers; cache channels also keep it.
func (h *Hub) publish(a *appState, name string, frame []byte, excl uint64, pushBack bool) error {
	if herald.Classify(name).Cache {
		var err error
		a.cache.with(name, h.now(), func([]byte) []byte {
			if ch := a.channels.lookup(name); ch != nil {
				err = h.dispatch(ch, frame, excl, pushBack, a.latency)
			}
			return frame
		})
		return err
	}
	ch := a.channels.lookup(name)
	if ch == nil {
		return nil
	}
	return h.dispatch(ch, frame, excl, pushBack, a.latency)
}

// dispatch sends one publish command to each worker that has subscribers of ch. With
// pushBack, a worker queue that stays full for the publish timeout fails the publish
// instead of blocking the publisher indefinitely. latency, when not nil, observes the time
// until the last worker has queued the frame for its subscribers.
func (h *Hub) dispatch(ch *Channel, frame []byte, excl uint64, pushBack bool, latency Observer) error {
	var track *pubTrack
	if latency != nil {
		n := int32(0)
		for i := range h.workers {
			if ch.wcount[i].Load() > 0 {
				n++
			}
		}
		if n == 0 {
			return nil
		}
		track = &pubTrack{start: mono(), obs: latency}
		track.left.Store(n)
	}
	for i, w := range h.workers {
		if ch.wcount[i].Load() <= 0 {
			continue
		}
		m := cmd{op: opPublish, ch: ch, frame: frame, excl: excl, track: track}
		select {
		case w.inbox <- m:
			continue
		default:
		}
		if !pushBack {
			w.inbox <- m
			continue
		}
		t := time.NewTimer(h.cfg.PublishTimeout)
		select {
		case w.inbox <- m:
			t.Stop()
		case <-t.C:
			return herald.Errorf(herald.CodeBusy, "fan-out queues are full, retry later")
		}
	}
	return nil
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
	ev := herald.Event{Name: m.Event, Channel: m.Channel, Data: data, UserID: s.userID}
	_ = h.publish(a, m.Channel, eventFrame(ev), c.num, false)
}
