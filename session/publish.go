package session

import (
	"slices"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// noMeasure observes nothing: frames that are not publishes (presence changes).
var noMeasure fanout.Measure

// Publish delivers each of evs to every subscriber of its channel (on every node of a
// cluster) except the connection named by its SocketID. Each event is encoded once into one
// frame that all its recipients share. On a single node it is all or nothing: it returns a
// CodeBusy error when the fan-out queues it needs stay full for the publish timeout, and then
// has delivered none of evs to anyone (nor kept any in a cache channel), so the caller
// answers 503 and the publisher retries without duplicating a thing. In a cluster it fails
// with CodeUnavailable while the bus is down (see cluster.State.Publish).
func (s *Server) Publish(appID string, evs ...herald.Event) error {
	a := s.app(appID)
	if a == nil {
		return herald.Errorf(herald.CodeAppNotFound, "app %q does not exist", appID)
	}
	var err error
	if len(evs) == 1 {
		err = s.st.Publish(a.st, evs[0], eventFrame(evs[0]))
	} else {
		// The state keeps neither; a copy keeps evs, which the caller may have on its stack,
		// from escaping on the single event's path.
		batch, frames := slices.Clone(evs), make([][]byte, len(evs))
		for i := range batch {
			frames[i] = eventFrame(batch[i])
		}
		err = s.st.PublishBatch(a.st, batch, frames)
	}
	if err != nil {
		return err
	}
	if a.wants(herald.APIEvent) {
		s.apiEvents(a, evs)
	}
	return nil
}

// eventFrame encodes ev as one complete WebSocket text frame with a single allocation.
func eventFrame(ev herald.Event) []byte {
	buf := make([]byte, ws.MaxHeader, ws.MaxHeader+48+len(ev.Name)+len(ev.Channel)+len(ev.UserID)+len(ev.Data)+len(ev.Data)/8)
	buf = pusher.AppendEvent(buf, ev.Name, ev.Channel, ev.Data, ev.UserID)
	return ws.FrameInPlace(buf, ws.OpText)
}

// clientEvent forwards a client-* event to the other subscribers of a private or presence
// channel the sender has joined.
func (s *Server) clientEvent(c *conn, m pusher.Message) {
	a := c.app
	cfg := a.cur()
	lim := cfg.Limits
	if !cfg.EnableClientMessages {
		s.sendError(c, herald.CodeClientEventDenied, "client events are not enabled for this app")
		return
	}
	if err := pusher.ValidateEventName(m.Event, lim.MaxEventNameLength); err != nil {
		s.sendError(c, herald.CodeClientEventDenied, herald.MessageOf(err))
		return
	}
	i := c.subIndex(m.Channel)
	if i < 0 {
		s.sendError(c, herald.CodeClientEventDenied, "client event rejected: not subscribed to channel "+m.Channel)
		return
	}
	sb := c.subs[i]
	if !sb.confirmed() {
		s.sendError(c, herald.CodeClientEventDenied, "client event rejected: the subscription to "+m.Channel+" is not confirmed yet")
		return
	}
	if k := sb.ch.Info().Kind; k != herald.Private && k != herald.Presence {
		s.sendError(c, herald.CodeClientEventDenied, "client events are only supported on private and presence channels")
		return
	}
	data := m.DataString()
	if pusher.ValidateEventData(data, lim.MaxEventPayloadBytes) != nil {
		s.sendError(c, herald.CodeTooLarge, "client event data is too large")
		return
	}
	if ok, wait := c.extra().events.Take(cfg.events, s.now()*1e6); !ok {
		s.slowDown(c, wait)
		c.Counters().EventsLimited.Add(1)
		s.sendError(c, herald.CodeRateLimited, "client event rejected: over the rate limit of "+
			strconv.Itoa(lim.MaxClientEventsPerSecond)+" events per second")
		return
	}
	ev := herald.Event{Name: m.Event, Channel: m.Channel, Data: data, UserID: sb.userID()}
	frame := eventFrame(ev)
	if a.wants(herald.ClientEvent) {
		a.emit(&herald.Activity{Kind: herald.ClientEvent, Channel: m.Channel, Event: m.Event, Data: data, SocketID: c.ID(), UserID: ev.UserID})
	}
	s.st.Forward(a.st, m.Channel, &c.Conn, frame)
}
