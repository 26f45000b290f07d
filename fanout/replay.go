package fanout

// Replay is what a subscriber gets after its subscription frame and before its channel's live
// frames (Engine.SubscribeReplay): Frames in order, then Tail. The frames are shared (a
// channel's history hands every subscriber the same ones) and never modified; the engine owns
// the slice from the call on.
type Replay struct {
	Frames [][]byte
	Tail   []byte // may be nil
}

// Bytes is the replay's size: its frames' and its tail's.
func (r *Replay) Bytes() int {
	n := len(r.Tail)
	for _, f := range r.Frames {
		n += len(f)
	}
	return n
}

// replay is one subscription's replay in progress, owned by its connection's worker. Its
// frames are queued in pages, the next one once the connection's queue has drained below a
// page (feed); the frames dispatched to its channel meanwhile are held behind it, within the
// connection's outbound bound, and queued after its tail (finish). Until then the connection
// is not in the channel's subscriber list: the channel's publishes reach it through held.
type replay struct {
	c         *Conn
	ch        *Channel
	frames    [][]byte // not yet queued
	tail      []byte
	held      [][]byte // the channel's frames dispatched since, in order
	heldBytes int
	next      *replay // the connection's next replay, in subscription order
	// at is when its connection last wrote something while this replay was its first (engine
	// clock, ms): a replay that waits long is stalled.
	at int64
}

// SubscribeReplay is Subscribe with a replay: c is added to ch's subscribers, frame is queued,
// then r's frames go out in pages under c's outbound bound, each once the previous one has
// drained, so that a replay of any length reaches a client that reads, whatever the bound.
// What is dispatched to ch meanwhile waits behind the replay (in order, within the bound: past
// it c is a slow consumer) and goes out after r.Tail. A replay stalled for the pong timeout (the
// client stopped reading) closes c as a slow consumer; a connection that closes drops its
// replays.
func (e *Engine) SubscribeReplay(c *Conn, ch *Channel, frame []byte, r *Replay) {
	ch.wcount[c.w.idx].Add(1)
	rp := &replay{c: c, ch: ch, frames: r.Frames, tail: r.Tail}
	c.w.inbox <- cmd{op: opSubReplay, c: c, ch: ch, frame: frame, p: rp}
}

// pageBytes is how much of a replay one connection has queued at most (unless one frame is
// larger): a quarter of the outbound bound, at most 256 KiB, so that the frames dispatched
// meanwhile always find room behind it.
func (w *worker) pageBytes() int { return max(min(256<<10, w.e.cfg.OutboundBufferBytes/4), 1) }

// startReplay begins r: its connection's subscription frame is queued already.
func (w *worker) startReplay(r *replay) {
	c := r.c
	if c.closing {
		return // nothing replays for a connection that is closing
	}
	if w.replays == nil {
		w.replays = map[*Channel][]*replay{}
	}
	w.replays[r.ch] = append(w.replays[r.ch], r)
	last := &c.rep
	for *last != nil {
		last = &(*last).next
	}
	*last = r
	c.replays = true
	r.at = w.e.Now()
	w.soon(r.at + w.e.cfg.PongTimeout.Milliseconds())
	w.feed(c)
}

// feed queues the next page of c's replays, if its queue has drained below a page, and ends
// the replays whose frames are all queued.
func (w *worker) feed(c *Conn) {
	page := w.pageBytes()
	if c.closing || c.outBytes >= page {
		return
	}
	queued, n := 0, 0
	for r := c.rep; r != nil && c.outBytes < page; r = c.rep {
		k := 0
		for k < len(r.frames) && c.outBytes < page {
			f := r.frames[k]
			r.frames[k] = nil // the history may forget it meanwhile
			c.out = append(c.out, f)
			c.outBytes += len(f)
			queued += len(f)
			k++
		}
		r.frames = r.frames[k:]
		n += k
		if len(r.frames) > 0 {
			break
		}
		w.finish(r)
	}
	if n > 0 {
		c.m.Sent.Add(int64(n))
		c.m.ReplayedBytes.Add(int64(queued))
		c.m.ReplayPages.Add(1)
		w.markDirty(c)
	}
}

// finish ends r, whose frames are queued: its tail and the frames held behind it follow, and
// its connection joins the channel's subscriber list.
func (w *worker) finish(r *replay) {
	c := r.c
	n := len(r.held)
	if r.tail != nil {
		c.out = append(c.out, r.tail)
		c.outBytes += len(r.tail)
		n++
	}
	c.out = append(c.out, r.held...)
	c.outBytes += r.heldBytes
	c.m.Sent.Add(int64(n))
	w.markDirty(c)
	w.subs[r.ch] = append(w.subs[r.ch], c)
	w.unlinkReplay(r)
}

// hold keeps a frame dispatched to r's channel behind r. It reports false when that made r's
// connection a slow consumer (its replays are dropped).
func (w *worker) hold(r *replay, frame []byte) bool {
	c := r.c
	if c.outBytes+r.heldBytes+len(frame) > w.e.cfg.OutboundBufferBytes {
		w.slow(c)
		return false
	}
	r.held = append(r.held, frame)
	r.heldBytes += len(frame)
	return true
}

// holdAll keeps frame behind every replay of ch here but the excluded connection's.
func (w *worker) holdAll(ch *Channel, frame []byte, excl uint64) {
	list := w.replays[ch]
	for i := 0; i < len(list); {
		if r := list[i]; r.c.num == excl || w.hold(r, frame) {
			i++
		}
		list = w.replays[ch] // a slow consumer's replay left it: list[i] is the next
	}
}

// unlinkReplay forgets r: from its channel's replays here and its connection's list.
func (w *worker) unlinkReplay(r *replay) {
	list := w.replays[r.ch]
	for i, x := range list {
		if x == r {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.replays, r.ch)
	} else {
		w.replays[r.ch] = list
	}
	for p := &r.c.rep; *p != nil; p = &(*p).next {
		if *p == r {
			*p = r.next
			break
		}
	}
	if first := r.c.rep; first != nil {
		first.at = max(first.at, r.at) // its wait counts from the replay before it
	} else {
		r.c.replays = false
	}
	r.next, r.frames, r.held = nil, nil, nil
}

// dropReplays forgets every replay of c (it is closing or gone).
func (w *worker) dropReplays(c *Conn) {
	for c.rep != nil {
		w.unlinkReplay(c.rep)
	}
}

// unsubReplay forgets c's replay of ch, if it has one, and reports whether it had.
func (w *worker) unsubReplay(c *Conn, ch *Channel) bool {
	for r := c.rep; r != nil; r = r.next {
		if r.ch == ch {
			w.unlinkReplay(r)
			return true
		}
	}
	return false
}

// stalled reports whether c's replay has queued nothing new for the pong timeout: its client
// stopped reading.
func (w *worker) stalled(c *Conn, now int64) bool {
	return c.replays && now-c.rep.at >= w.e.cfg.PongTimeout.Milliseconds()
}
