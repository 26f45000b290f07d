package fanout

import (
	"math"
	"time"
)

type op uint8

const (
	opAttach     op = iota // start owning c
	opSend                 // queue frame for c
	opSync                 // queue frame for c, and hold nothing: write every held and dirty connection (Sync)
	opSub                  // add c to ch's subscribers here, then queue frame and extra
	opSubReplay            // queue frame for c, then replay rep before adding c to ch's subscribers here
	opUnsub                // remove c from ch's subscribers here
	opPublish              // queue frame for every subscriber of ch here but the excluded one
	opBatch                // opPublish for each publish in pubs, in order (Batch)
	opClose                // queue frame (error + close) for c and shut it down once it is out
	opCloseAll             // close every connection with the engine's drain frame
	opCloseGroup           // close every connection of group g with frame, its code in excl
	opCloseSubs            // close every subscriber of ch here with frame, its code in excl
	opWritable             // c's socket drained: flush
	opHangup               // c is gone: forget it and release its socket
)

// cmd is one instruction to a worker. Frames are shared and never modified. A worker's
// inbox holds InboxSize of them, resident once the queue has cycled: each byte of cmd is
// 16 KiB of a node's memory with two workers, so the fields that only some ops use share p.
type cmd struct {
	op    op
	slot  bool // opPublish: holds one of the worker's slots, given back when handled
	c     *Conn
	ch    *Channel
	frame []byte
	// excl is, for opPublish, the Conn.num not to deliver to; for opCloseGroup and
	// opCloseSubs, the close code; for opSub, the frames frame holds (1 or 2).
	excl uint64
	// p is, for opPublish, a *pubTrack measuring publish → last frame queued (may be nil);
	// for opBatch, the *[]pub; for opSubReplay, the *replay; for opCloseGroup, the *Group.
	p any
}

// worker owns a fixed share of the connections: their outbound queues, their writes and
// their place in each channel's subscriber list. Only the worker's goroutine touches these.
type worker struct {
	e     *Engine
	idx   int
	inbox chan cmd
	// slots is a counting semaphore of the inbox's size: a publisher that may be refused
	// takes one per command before sending any of its commands (Engine.Reserve), so that a
	// publish is queued whole or not at all; the worker gives it back on handling the command.
	slots chan struct{}
	subs  map[*Channel][]*Conn
	conns []*Conn
	dirty []*Conn
	spare []*Conn // the dirty list flushDirty is not using: a flush may dirty a connection again
	done  chan struct{}

	// outs are queue arrays given back by connections seldom written whose queue a write
	// emptied (flush): an idle connection holds none (each idle connection pays for what it
	// keeps, see TestIdleConnHoldsNoQueue), and the next frame queued for one takes one
	// back. A connection written more often keeps its own: a steady fan-out allocates
	// nothing and does no more per delivery. The sweep timer drops them once none was taken
	// for outsKept sweep intervals (ageOuts). They are taken in the order given back
	// (outs[outsHead:]), so that connections visited in order, as a fan-out visits them,
	// find their arrays in order.
	outs     [][][]byte
	outsHead int
	outsIdle int   // sweep intervals since one was taken
	outsDue  int64 // when the sweep timer ages them next (engine clock, ms); never: none kept
	// Write coalescing (coalesce.go): the dirty connections whose frames wait, the earliest
	// time one of them is due and the timer set for it, and the load that sets the delay.
	held      []*Conn
	heldSpare []*Conn
	heldUntil int64
	holdTimer *time.Timer
	pace      pace
	now       int64 // mono when the worker last woke or last began to flush
	unheld    bool  // the next flush holds nothing (Sync)
	// replays are the replays in progress here, by channel (replay.go); a channel's entry
	// goes with its last replay, so a publish looks them up only while there is one.
	replays map[*Channel][]*replay
	// Sweeping (sweep): the earliest time (engine clock, ms) a sweep can find something to
	// do, the time the sweep timer is set for (never: stopped), and the last sweep's time.
	due, sweepAt, swept int64
	sweepTimer          *time.Timer
}

// never is a time that never comes: nothing due, no sweep planned.
const never = math.MaxInt64

func newWorker(e *Engine, idx int) *worker {
	return &worker{
		e:          e,
		idx:        idx,
		inbox:      make(chan cmd, e.cfg.InboxSize),
		slots:      make(chan struct{}, e.cfg.InboxSize),
		subs:       map[*Channel][]*Conn{},
		done:       make(chan struct{}),
		holdTimer:  stoppedTimer(),
		pace:       pace{max: int64(e.cfg.WriteDelay), from: mono()},
		due:        never,
		sweepAt:    never,
		outsDue:    never,
		sweepTimer: stoppedTimer(),
	}
}

// stoppedTimer returns a timer that is not set.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// maxBatch bounds how many commands one batch takes before flushing, so a flood cannot
// delay writes indefinitely.
const maxBatch = 4096

func (w *worker) run(stop <-chan struct{}) {
	defer close(w.done)
	defer w.holdTimer.Stop()
	defer w.sweepTimer.Stop()
	tick := w.sweepTimer.C
	for {
		var held <-chan time.Time // nil, never ready, while nothing is held
		if len(w.held) > 0 {
			held = w.holdTimer.C
		}
		select {
		case c := <-w.inbox:
			woke := w.wake()
			w.handle(c)
			w.take()
			if !w.flushAll(tick, stop) {
				return
			}
			w.pace.awake(woke, mono())
		case <-held:
			woke := w.wake()
			w.release()
			if !w.flushAll(tick, stop) {
				return
			}
			w.pace.awake(woke, mono())
		case <-tick:
			w.wake()
			w.sweep(w.e.Now())
			if !w.flushAll(tick, stop) {
				return
			}
		case <-stop:
			return
		}
	}
}

// wake notes the time the worker woke (mono) and returns it.
func (w *worker) wake() int64 {
	w.now = mono()
	return w.now
}

// flushAll flushes the dirty connections, then goes on while replays whose page was written
// whole queued their next one, taking the commands that came meanwhile (and the sweep when
// tick says it is due), until their sockets are full or they end. It reports false when stop
// closed meanwhile.
func (w *worker) flushAll(tick <-chan time.Time, stop <-chan struct{}) bool {
	w.now = mono() // what the worker handled since it woke may have taken a while
	w.flushDirty()
	for len(w.dirty) > 0 {
		select {
		case <-tick:
			w.sweep(w.e.Now())
		case <-stop:
			return false
		default:
		}
		w.take()
		w.flushDirty()
	}
	return true
}

// take handles the commands waiting in the inbox, at most maxBatch, without waiting.
func (w *worker) take() {
	for i := 0; i < maxBatch; i++ {
		select {
		case c := <-w.inbox:
			w.handle(c)
		default:
			return
		}
	}
}

func (w *worker) handle(m cmd) {
	switch m.op {
	case opPublish:
		if m.slot {
			<-w.slots
		}
		w.publish(m.ch, m.frame, m.excl)
		track, _ := m.p.(*pubTrack)
		track.done()
	case opBatch:
		w.publishBatch(m.p.(*[]pub))
	case opSend:
		w.enqueue(m.c, m.frame)
		m.c.m.Sent.Add(1)
	case opSync:
		w.release()
		w.unheld = true // and the connections dirty now are written in this flush
		w.enqueue(m.c, m.frame)
	case opSub:
		w.subs[m.ch] = append(w.subs[m.ch], m.c)
		w.enqueue(m.c, m.frame)
		m.c.m.Sent.Add(int64(m.excl))
	case opSubReplay:
		w.enqueue(m.c, m.frame)
		m.c.m.Sent.Add(1)
		w.startReplay(m.p.(*replay))
	case opUnsub:
		if m.c.rep == nil || !w.unsubReplay(m.c, m.ch) {
			w.unsub(m.c, m.ch)
		}
	case opAttach:
		m.c.widx = len(w.conns)
		w.conns = append(w.conns, m.c)
		w.soon(m.c.lastSeen.Load() + w.e.cfg.ActivityTimeout.Milliseconds())
	case opClose:
		w.close(m.c, m.frame)
	case opCloseAll:
		d := w.e.drain
		for _, c := range w.conns {
			c.ClosedWith(d.Code)
			w.close(c, d.Frame)
		}
	case opCloseSubs:
		for _, c := range w.subs[m.ch] {
			c.ClosedWith(int(m.excl))
			w.close(c, m.frame)
		}
		for len(w.replays[m.ch]) > 0 { // closing drops the replay
			c := w.replays[m.ch][0].c
			c.ClosedWith(int(m.excl))
			w.close(c, m.frame)
		}
	case opCloseGroup:
		g := m.p.(*Group)
		for _, c := range w.conns {
			if c.m.g == g {
				c.ClosedWith(int(m.excl))
				w.close(c, m.frame)
			}
		}
	case opWritable:
		m.c.blocked = false
		w.flush(m.c)
	case opHangup:
		w.hangup(m.c)
	}
}

// publish queues frame for every subscriber of ch here but the connection numbered excl.
func (w *worker) publish(ch *Channel, frame []byte, excl uint64) {
	subs := w.subs[ch]
	n := 0
	for _, c := range subs {
		if c.num != excl {
			w.enqueue(c, frame)
			n++
		}
	}
	if n > 0 {
		// Every subscriber here is of the channel's group and this worker: one shard.
		subs[0].m.Sent.Add(int64(n))
	}
	if len(w.replays) > 0 {
		w.holdAll(ch, frame, excl)
	}
}

func (w *worker) unsub(c *Conn, ch *Channel) {
	list := w.subs[ch]
	for i, x := range list {
		if x == c {
			last := len(list) - 1
			list[i] = list[last]
			list[last] = nil
			list = list[:last]
			break
		}
	}
	if len(list) == 0 {
		delete(w.subs, ch)
	} else {
		w.subs[ch] = list
	}
}

// enqueue queues frame for c. A connection whose queue would pass the byte bound is a slow
// consumer: it is closed instead, and the publisher never waits for it.
func (w *worker) enqueue(c *Conn, frame []byte) {
	if c.closing {
		return
	}
	if c.outBytes+len(frame) > w.e.cfg.OutboundBufferBytes {
		w.slow(c)
		return
	}
	if len(c.out) < cap(c.out) {
		c.out = append(c.out, frame)
	} else {
		w.appendOut(c, frame)
	}
	c.outBytes += len(frame)
	w.markDirty(c)
}

// appendOut appends frame to c's full queue, or to an array given back if c has none. Apart
// from enqueue's common path, which it keeps as short as it was (no spills for the call).
//
//go:noinline
func (w *worker) appendOut(c *Conn, frame []byte) {
	w.takeOut(c)
	c.out = append(c.out, frame)
}

// takeOut gives c, if it has no queue array, the first given back, if there is one.
func (w *worker) takeOut(c *Conn) {
	if c.out != nil || w.outsHead == len(w.outs) {
		return
	}
	c.out = w.outs[w.outsHead]
	w.outs[w.outsHead] = nil
	if w.outsHead++; w.outsHead == len(w.outs) {
		w.outs, w.outsHead = w.outs[:0], 0
	}
	w.outsIdle = 0
}

// giveOut keeps c's emptied queue array in outs for the next connection that needs one.
func (w *worker) giveOut(c *Conn) {
	if len(w.outs) == cap(w.outs) && w.outsHead > 0 {
		// Full, but taken from the front: move what is left down rather than grow.
		n := copy(w.outs, w.outs[w.outsHead:])
		clear(w.outs[n:])
		w.outs, w.outsHead = w.outs[:n], 0
	}
	if w.outsDue == never {
		// None kept since the last were dropped: the sweep timer ages them (ageOuts),
		// without a sweep.
		w.outsDue = w.e.Now() + w.e.cfg.SweepInterval.Milliseconds()
		w.arm()
	}
	w.outs = append(w.outs, c.out)
	c.out = nil
}

// ageOuts counts a sweep interval without a queue array taken back, and drops them all after
// outsKept of them; while some are kept, the sweep timer comes back a sweep interval later
// for that alone (sweep returns early when no connection is due).
func (w *worker) ageOuts(now int64) {
	if w.outs == nil {
		w.outsDue = never
		return
	}
	if w.outsIdle++; w.outsIdle >= outsKept {
		clear(w.outs)
		w.outs, w.outsHead, w.outsDue = nil, 0, never
		return
	}
	w.outsDue = now + w.e.cfg.SweepInterval.Milliseconds()
}

// outsKept is how many sweep intervals the given-back queue arrays outlive their last use.
const outsKept = 5

// coldMicros is how long (µs, as stamp counts) a connection went unwritten for its write to
// give its emptied queue array back: one written more often than once a second keeps it.
const coldMicros = 1_000_000

// slow closes c as a slow consumer: what it has queued is dropped, its close goes out next.
func (w *worker) slow(c *Conn) {
	c.m.Slow.Add(1)
	w.e.warnSlow(c)
	w.drop(c)
	slow := w.e.cfg.Slow
	c.ClosedWith(slow.Code)
	w.close(c, slow.Frame)
	w.makeRoom(c)
}

func (w *worker) markDirty(c *Conn) {
	if !c.dirty {
		c.dirty = true
		w.dirty = append(w.dirty, c)
	}
}

// drop discards queued frames, keeping only the unwritten tail of a frame already started
// (the stream would be corrupt without it).
func (w *worker) drop(c *Conn) {
	keep := 0
	if len(c.out) > 0 && c.outBytes > 0 && c.headCut {
		keep = 1
	}
	clear(c.out[keep:])
	c.out = c.out[:keep]
	c.outBytes = 0
	for _, b := range c.out {
		c.outBytes += len(b)
	}
}

// makeRoom lets what a slow consumer still has queued (the rest of a frame cut mid-write,
// then its close frames) into the kernel now, behind the bytes the client has not read, so
// that a client that still reads, however slowly, gets its close rather than a connection
// cut at the close grace with its close frame unsent. Without room the close grace applies
// as before.
func (w *worker) makeRoom(c *Conn) {
	if r, ok := c.t.(RoomMaker); ok && r.MakeRoom(c.outBytes) == nil {
		c.blocked = false // flushDirty writes it in this batch
	}
}

// close queues frame (an error and a close frame) as the last thing c receives and shuts c
// down once it is out, or at the close deadline.
func (w *worker) close(c *Conn, frame []byte) {
	if c.closing {
		return
	}
	c.closing = true
	if c.rep != nil {
		w.dropReplays(c)
	}
	c.at = w.e.Now() + w.e.cfg.CloseGrace.Milliseconds()
	w.soon(c.at)
	w.takeOut(c)
	c.out = append(c.out, frame)
	c.outBytes += len(frame)
	w.markDirty(c)
}

func (w *worker) flushDirty() {
	list := w.dirty
	w.dirty = w.spare[:0] // a replay's next page dirties its connection again (feed)
	hold := !w.unheld
	w.unheld = false
	for _, c := range list {
		switch {
		case c.blocked:
			c.dirty = false
		case hold && w.holds(c, w.now):
			w.holdBack(c, w.now) // stays dirty
		default:
			c.dirty = false
			w.flush(c)
		}
	}
	clear(list)
	w.spare = list[:0]
}

// flush writes c's queue with one writev.
func (w *worker) flush(c *Conn) {
	if c.shut || len(c.out) == 0 {
		return
	}
	n, blocked, err := c.t.Writev(c.out)
	if n > 0 {
		now := stamp(w.now)
		cold := c.wrote == 0 || now-c.wrote >= coldMicros // 0: never written
		c.wrote = now
		c.consume(n)
		c.m.SentBytes.Add(int64(n))
		c.m.Writes.Add(1)
		if c.replays {
			c.rep.at = w.e.Now()
		} else if cold && len(c.out) == 0 {
			// Emptied (consume cleared it) and seldom written: the array waits in outs for
			// the next frame; a connection written more often keeps its own.
			w.giveOut(c)
		}
	}
	switch {
	case err != nil:
		// The socket is dead; the reader reports the hang-up.
		c.closing = true
		w.dropReplays(c)
		w.shutdown(c)
	case blocked:
		c.blocked = true
	case c.closing && len(c.out) == 0:
		w.shutdown(c)
	case c.replays:
		w.feed(c)
	}
}

func (w *worker) shutdown(c *Conn) {
	if !c.shut {
		c.shut = true
		c.t.Shutdown()
	}
}

// hangup forgets c: its place in conns, its queue; then it releases the socket and
// uncounts the connection. This is the one place a connection is uncounted. The layer
// above has unsubscribed c from each of its channels before (Engine.Unsubscribe).
func (w *worker) hangup(c *Conn) {
	last := len(w.conns) - 1
	if c.widx <= last && w.conns[c.widx] == c {
		w.conns[c.widx] = w.conns[last]
		w.conns[c.widx].widx = c.widx
		w.conns[last] = nil
		w.conns = w.conns[:last]
	}
	clear(c.out)
	c.out = nil
	c.outBytes = 0
	w.dropReplays(c)
	c.closing, c.shut = true, true
	c.t.Close()
	w.e.uncount(c)
}

// sweep pings connections that have been silent for the activity timeout, closes those that
// did not answer within the pong timeout, and forces out closes that did not drain. It runs
// when the sweep timer fires: at the earliest time it can find something to do (due), and
// no sooner than a sweep interval after the last sweep. Until a connection is due nothing
// visits it: an idle node with nothing due sleeps instead of walking every connection each
// sweep interval (each sweep is a cache miss or two per connection).
func (w *worker) sweep(now int64) {
	w.sweepAt = never // the timer fired
	if now >= w.outsDue {
		w.ageOuts(now)
	}
	if now < w.due {
		w.arm()
		return
	}
	w.due, w.swept = never, now // what closes meanwhile lowers due (soon)
	next := int64(never)
	act := w.e.cfg.ActivityTimeout.Milliseconds()
	pong := w.e.cfg.PongTimeout.Milliseconds()
	for _, c := range w.conns {
		if c.closing {
			if !c.shut {
				if now >= c.at {
					w.shutdown(c)
				} else {
					next = min(next, c.at)
				}
			}
			continue
		}
		if c.replays {
			if w.stalled(c, now) {
				w.slow(c)
				continue
			}
			next = min(next, c.rep.at+pong)
		}
		last := c.lastSeen.Load()
		if c.at != 0 {
			if last >= c.at {
				c.at = 0
			} else if now-c.at >= pong && w.missedPong(c, now) {
				continue // closed
			} else {
				next = min(next, pongDue(c.at, now, act, pong))
			}
		}
		if c.at == 0 {
			if now-last >= act {
				c.at = now
				w.enqueue(c, w.e.cfg.Ping)
				next = min(next, pongDue(now, now, act, pong))
			} else {
				next = min(next, last+act)
			}
		}
	}
	w.due = min(w.due, next)
	w.arm()
}

// pongDue is when a sweep next looks at a connection pinged at ping and not yet known to
// have answered: at the pong timeout, to close it, or, when the activity timeout is shorter
// and not yet passed, then, so that a pong that came meanwhile lets the next ping go an
// activity timeout after it, as a sweep every interval would (not a pong timeout on).
func pongDue(ping, now, act, pong int64) int64 {
	if a := ping + act; a < ping+pong && a > now {
		return a
	}
	return ping + pong
}

// soon notes that a sweep has something to do at t (engine clock, ms): a connection
// attached, closing, or replaying.
func (w *worker) soon(t int64) {
	if t < w.due {
		w.due = t
		w.arm()
	}
}

// arm sets the sweep timer for the due time, a sweep interval after the last sweep at the
// soonest, unless it is set for that or sooner already.
func (w *worker) arm() {
	at := int64(never)
	if w.due != never {
		at = max(w.due, w.swept+w.e.cfg.SweepInterval.Milliseconds())
	}
	at = min(at, w.outsDue)
	if at == never {
		return
	}
	if at < w.sweepAt {
		w.sweepAt = at
		w.sweepTimer.Reset(time.Duration(at-w.e.Now()) * time.Millisecond)
	}
}
