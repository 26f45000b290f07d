package fanout

import (
	"sync/atomic"
	"time"
)

// Write coalescing. A worker writes each dirty connection once per batch of commands, so a
// burst that arrives while the worker is busy leaves in one write. But a burst that arrives
// spread out (a cluster node gets a channel's events one bus message at a time, each as its
// publisher's previous request came back) would leave one frame per write: a writev per
// frame, several times the CPU of the same deliveries batched, which fills the machine,
// which spreads the bursts further.
//
// So a busy worker holds the frames of a connection it wrote very recently, for at most its
// delay after that write, and writes them with what comes for the connection meanwhile. A
// connection not written lately is written at once, so an event's first frame to each
// subscriber never waits; and an idle worker holds nothing. The delay adapts to the worker's
// load (pace): none while the worker is busy less than paceIdle of the time, growing fast
// to Config.WriteDelay while it is busier than paceBusy, shrinking slowly in between.

const (
	paceWindow = 5 * time.Millisecond // the span a worker's load is measured over
	paceIdle   = 0.15                 // busy less than this: no delay at all
	paceBusy   = 0.5                  // busy more than this: the delay grows
	paceStep   = 100 * time.Microsecond
)

// pace measures a worker's load, the fraction of time it is awake (handling commands and
// writing, or runnable and waiting for a core), and gives the delay that follows from it.
type pace struct {
	max   int64        // ns: Config.WriteDelay; 0: never hold
	from  int64        // ns (mono): the start of the current window
	busy  int64        // ns awake in the current window
	delay int64        // ns: how long a recently written connection's frames may wait now
	shown atomic.Int64 // delay, for Engine.WriteDelays
}

// awake records that the worker was awake from woke to now (mono), and at the end of each
// window adapts the delay to the window's load.
func (p *pace) awake(woke, now int64) {
	p.busy += now - woke
	span := now - p.from
	if span < int64(paceWindow) {
		return
	}
	load := float64(p.busy) / float64(span)
	switch {
	case p.max == 0 || load < paceIdle:
		p.delay = 0
	case load > paceBusy:
		p.delay = min(p.max, max(2*p.delay, p.max/4)) // at its bound within 3 windows
	default:
		p.delay = max(p.delay-int64(paceStep), 0)
	}
	p.from, p.busy = now, 0
	p.shown.Store(p.delay)
}

// WriteDelays returns each worker's write delay now (coalesce.go): 0 while it is not busy.
func (e *Engine) WriteDelays() []time.Duration {
	out := make([]time.Duration, len(e.workers))
	for i, w := range e.workers {
		out[i] = time.Duration(w.pace.shown.Load())
	}
	return out
}

// stamp is a connection's last write time as Conn.wrote keeps it: mono in microseconds,
// modulo 2^32 (compared by difference, it wraps harmlessly every 71 minutes).
func stamp(now int64) uint32 { return uint32(now / 1000) }

// holds reports whether c's frames wait rather than go now: the worker is busy (delay), c
// was written less than delay ago, and nothing about c needs them out at once (a close, a
// replay feeding its pages).
func (w *worker) holds(c *Conn, now int64) bool {
	d := w.pace.delay
	return d > 0 && !c.closing && !c.replays && c.wrote != 0 &&
		int64(stamp(now)-c.wrote) < d/1000
}

// holdBack keeps dirty c in the held list (it stays dirty: what is queued for it meanwhile joins
// it) and arms the timer for the earliest release.
func (w *worker) holdBack(c *Conn, now int64) {
	until := now + w.pace.delay - int64(stamp(now)-c.wrote)*1000
	if len(w.held) == 0 || until < w.heldUntil {
		w.heldUntil = until
		w.holdTimer.Reset(time.Duration(max(until-now, 0)))
	}
	w.held = append(w.held, c)
}

// release writes every held connection, now that the earliest of them is due: the others
// go early rather than each on its own timer (fewer wake-ups; their hold was only a chance
// to gather more).
func (w *worker) release() {
	list := w.held
	w.held = w.heldSpare[:0]
	for _, c := range list {
		c.dirty = false
		if !c.blocked {
			w.flush(c)
		}
	}
	clear(list)
	w.heldSpare = list[:0]
}
