package fanout

import "sync"

// Batch collects publishes and sends each worker all of its share as one command, so that a
// worker queues the frames of every publish in the batch before it flushes: a connection
// gets what one batch brings in one write, as a REST batch or a burst on one node does.
// What a node drains from the cluster bus at once is dispatched as one Batch.
//
// A Batch is used by one goroutine at a time. Its publishes reach each subscriber in the
// order they were added; a publish added but not yet sent is not delivered, so a caller
// that also dispatches some channel's events directly (Dispatch) must not batch that
// channel's, or must Send first.
type Batch struct {
	e   *Engine
	per []*[]pub // by worker; nil until the first publish for that worker
	n   int
}

// pub is one publish in a batch command.
type pub struct {
	ch    *Channel
	frame []byte
	excl  uint64
	track *pubTrack
}

// pubLists recycles the lists a Batch hands its workers: a worker puts one back, emptied,
// once it has queued its frames.
var pubLists = sync.Pool{New: func() any { s := make([]pub, 0, 64); return &s }}

// NewBatch returns an empty batch of publishes for e's workers.
func (e *Engine) NewBatch() *Batch { return &Batch{e: e, per: make([]*[]pub, len(e.workers))} }

// Len is how many publishes were added since the last Send.
func (b *Batch) Len() int { return b.n }

// Add adds a publish of frame to every subscriber of ch on this node but the connection
// numbered excl (0: none), observing m once its last frame is queued (see Dispatch).
// Workers with no subscriber of ch now are skipped.
func (b *Batch) Add(ch *Channel, frame []byte, excl uint64, m Measure) {
	track, ok := m.track(ch)
	if !ok {
		return
	}
	for i := range b.per {
		if ch.wcount[i].Load() <= 0 {
			continue
		}
		l := b.per[i]
		if l == nil {
			l = pubLists.Get().(*[]pub)
			b.per[i] = l
		}
		*l = append(*l, pub{ch: ch, frame: frame, excl: excl, track: track})
	}
	b.n++
}

// Send hands each worker its share of the publishes added, as one command, waiting for
// room in its queue as Dispatch does, and empties b.
func (b *Batch) Send() {
	for i, l := range b.per {
		if l == nil {
			continue
		}
		b.per[i] = nil
		b.e.workers[i].inbox <- cmd{op: opBatch, p: l}
	}
	b.n = 0
}

// publishBatch queues the frames of every publish in l for the worker's subscribers, in
// order, then recycles l. A run of publishes to one channel (what a node drains from the bus
// at once for it) is one pass over the channel's subscribers, each given the run's frames.
func (w *worker) publishBatch(l *[]pub) {
	ps := *l
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && ps[j].ch == ps[i].ch {
			j++
		}
		if j == i+1 {
			w.publish(ps[i].ch, ps[i].frame, ps[i].excl)
		} else {
			w.publishRun(ps[i:j])
		}
		for _, p := range ps[i:j] {
			p.track.done()
		}
		i = j
	}
	clear(ps)
	*l = ps[:0]
	pubLists.Put(l)
}

// publishRun queues the frames of run, publishes to one channel, for each of its
// subscribers here in one pass, as publish does for one.
func (w *worker) publishRun(run []pub) {
	ch := run[0].ch
	subs := w.subs[ch]
	n := 0
	for _, c := range subs {
		for _, p := range run {
			if c.num != p.excl {
				w.enqueue(c, p.frame)
				n++
			}
		}
	}
	if n > 0 {
		subs[0].m.Sent.Add(int64(n))
	}
	if len(w.replays) > 0 {
		for _, p := range run {
			w.holdAll(ch, p.frame, p.excl)
		}
	}
}
