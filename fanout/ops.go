package fanout

// The connection's commands. Each is sent to the connection's worker's inbox: a blocking
// send that waits at most as long as the worker needs to drain its inbox (workers take no
// lock, so a caller may hold its own locks while sending). They run in the order sent.

// Init makes c a connection of group g: it gets its number, socket id and worker. Call it
// once, before Attach; the socket id is c.ID() from then on.
func (e *Engine) Init(c *Conn, g *Group) {
	num := e.nextNum.Add(1)
	widx := num % uint64(len(e.workers))
	c.num, c.w, c.m = num, e.workers[widx], &g.counters[widx]
	c.lastSeen.Store(e.Now())
}

// Attach hands c, writing to t, to its worker. If the engine is draining, c is closed at
// once like the others (the client may have had its handshake already).
func (e *Engine) Attach(c *Conn, t Transport) {
	c.t = t
	c.w.inbox <- cmd{op: opAttach, c: c}
	if e.draining.Load() {
		// Drain's close-all may have passed this worker before the attach.
		c.ClosedWith(e.drain.Code)
		c.w.inbox <- cmd{op: opClose, c: c, frame: e.drain.Frame}
	}
}

// Send queues frame for c.
func (e *Engine) Send(c *Conn, frame []byte) {
	c.w.inbox <- cmd{op: opSend, c: c, frame: frame}
}

// Close queues frame (an error and a close frame) as the last thing c receives, then shuts
// c down once it is out or at the close grace.
func (e *Engine) Close(c *Conn, frame []byte) {
	c.w.inbox <- cmd{op: opClose, c: c, frame: frame}
}

// Writable tells c's worker that its socket has room again.
func (e *Engine) Writable(c *Conn) { c.w.inbox <- cmd{op: opWritable, c: c} }

// Hangup tells c's worker that c is gone: it forgets c and releases its socket, and c stops
// counting. Unsubscribe c from its channels first.
func (e *Engine) Hangup(c *Conn) { c.w.inbox <- cmd{op: opHangup, c: c} }

// Subscribe adds c to ch's subscribers, then queues frame (and extra, if not nil) for it:
// c receives whatever is dispatched to ch after frame.
func (e *Engine) Subscribe(c *Conn, ch *Channel, frame, extra []byte) {
	ch.wcount[c.w.idx].Add(1)
	n := uint64(1)
	if extra != nil { // one frame after the other on the wire: one slice in the queue
		frame, n = append(append(make([]byte, 0, len(frame)+len(extra)), frame...), extra...), 2
	}
	c.w.inbox <- cmd{op: opSub, c: c, ch: ch, frame: frame, excl: n}
}

// CloseChannel closes every connection subscribed to ch on this node with how, as the
// engine closes a slow consumer: what is queued before it is written first.
func (e *Engine) CloseChannel(ch *Channel, how Close) {
	for i, w := range e.workers {
		if ch.wcount[i].Load() > 0 {
			w.inbox <- cmd{op: opCloseSubs, ch: ch, frame: how.Frame, excl: uint64(how.Code)}
		}
	}
}

// Unsubscribe removes c, added by Subscribe, from ch's subscribers.
func (e *Engine) Unsubscribe(c *Conn, ch *Channel) {
	c.w.inbox <- cmd{op: opUnsub, c: c, ch: ch}
	ch.wcount[c.w.idx].Add(-1)
}

// Sync returns once every worker has written what was queued before the call (to
// transports that take it at once). It serializes its callers.
func (e *Engine) Sync() {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	if e.syncs == nil {
		for _, w := range e.workers {
			e.syncs = append(e.syncs, &Conn{t: &syncTransport{done: make(chan struct{}, 1)}, w: w, m: &Counters{}})
		}
	}
	for _, c := range e.syncs {
		c.w.inbox <- cmd{op: opSync, c: c, frame: syncFrame}
		<-c.t.(*syncTransport).done
	}
}

var syncFrame = []byte{0}

// syncTransport takes every write and signals it.
type syncTransport struct{ done chan struct{} }

func (s *syncTransport) Writev(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	s.done <- struct{}{}
	return n, false, nil
}
func (s *syncTransport) Shutdown()    {}
func (s *syncTransport) Close() error { return nil }

// Local returns the number of this node's connection whose socket id is sid, or 0 when sid
// is not one of this node's.
func (e *Engine) Local(sid string) uint64 { return parseSocketID(e.prefix, sid) }

// CloseGroup closes every connection of group g that a worker holds now with frame (an
// error and a close frame with code): the connections of an app disabled or deleted. A
// connection attached after its worker handled this is not closed: the layer above checks
// again after Attach.
func (e *Engine) CloseGroup(g *Group, code int, frame []byte) {
	for _, w := range e.workers {
		w.inbox <- cmd{op: opCloseGroup, p: g, frame: frame, excl: uint64(code)}
	}
}
