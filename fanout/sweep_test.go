package fanout

import (
	"testing"
	"time"
)

// sweptConn attaches a connection, seen now (seen, engine clock), to a worker of an engine of
// one worker with cfg (ping "ping;", pong lost: 4201 "lost;"), whose sweeps the test calls.
func sweptConn(t *testing.T, cfg Config) (*worker, *Conn, *counted, int64) {
	t.Helper()
	cfg.Workers, cfg.Ping, cfg.PongLost = 1, []byte("ping;"), Close{Code: 4201, Frame: []byte("lost;")}
	e := New(cfg, nil)
	t.Cleanup(e.Stop)
	w := newWorker(e, 0)
	t.Cleanup(func() { w.sweepTimer.Stop() })
	tr := &counted{}
	c := &Conn{t: tr, m: &Counters{g: &Group{id: "app"}}, w: w}
	seen := e.Now()
	c.lastSeen.Store(seen)
	w.handle(cmd{op: opAttach, c: c})
	return w, c, tr, seen
}

// TestSweepWhenDue: a worker plans its sweep for the first time something is due (the
// activity timeout after a connection was last seen, the pong timeout after a ping, a close's
// grace), a sweep interval after the last sweep at the soonest; a sweep before then does
// nothing, and the sweeps then ping, forgive an answered ping, close a silent connection and
// shut it down, as a sweep every interval would.
func TestSweepWhenDue(t *testing.T) {
	w, c, tr, seen := sweptConn(t, Config{ActivityTimeout: 10 * time.Second, PongTimeout: 5 * time.Second,
		CloseGrace: 100 * time.Millisecond})
	const closeGrace = -1 // step's due: c's close deadline
	step := func(what string, now int64, writes int, due, at int64) {
		t.Helper()
		w.sweep(now)
		w.now = mono()
		w.flushDirty()
		if due == closeGrace {
			due = c.at
		}
		// The queue arrays that writes give back (outs) bring the timer forward to age them.
		at = min(at, w.outsDue)
		if calls, got := tr.got(); calls != writes || w.due != due || w.sweepAt != at {
			t.Fatalf("%s: %d writes (%q), due %d, sweep at %d; want %d writes, due %d, sweep at %d (ms after the connection was seen)",
				what, calls, got, w.due-seen, w.sweepAt-seen, writes, due-seen, at-seen)
		}
	}
	if w.due != seen+10_000 || w.sweepAt != w.due {
		t.Fatalf("attached: due %d, sweep at %d; want both at the activity timeout, %d", w.due-seen, w.sweepAt-seen, 10_000)
	}
	step("before the activity timeout", seen+9_999, 0, seen+10_000, seen+10_000)
	step("at the activity timeout", seen+10_000, 1, seen+15_000, seen+15_000)
	c.Seen(seen + 12_000) // the pong
	step("ping answered", seen+15_000, 1, seen+22_000, seen+22_000)
	step("silent again", seen+22_000, 2, seen+27_000, seen+27_000)
	step("ping not answered", seen+27_000, 3, closeGrace, seen+28_000) // its close grace, a sweep interval on
	if c.CloseCode() != 4201 || !c.closing {
		t.Fatalf("close code %d, closing %v; want 4201, closing", c.CloseCode(), c.closing)
	}
	step("close grace passed", seen+28_000, 3, never, never)
	if !c.shut {
		t.Fatal("not shut down at its close grace")
	}
}

// TestSweepPingCadence: with an activity timeout shorter than the pong timeout, a worker
// looks again at the activity timeout after a ping, so that an answered ping lets the next go
// an activity timeout after the pong, as a sweep every interval would, not a pong timeout on.
func TestSweepPingCadence(t *testing.T) {
	w, c, tr, seen := sweptConn(t, Config{ActivityTimeout: 2 * time.Second, PongTimeout: 30 * time.Second})
	w.sweep(seen + 2_000) // the first ping
	w.now = mono()
	w.flushDirty()
	if calls, _ := tr.got(); calls != 1 || w.due != seen+4_000 {
		t.Fatalf("after the first ping: %d writes, due %d; want 1, at the activity timeout after it (4000)", calls, w.due-seen)
	}
	c.Seen(seen + 2_100) // the pong
	w.sweep(seen + 4_000)
	if w.due != seen+4_100 {
		t.Fatalf("the pong seen: due %d, want the activity timeout after it (4100)", w.due-seen)
	}
	w.sweep(seen + 4_100)
	w.now = mono()
	w.flushDirty()
	if calls, got := tr.got(); calls != 2 {
		t.Fatalf("%d writes (%q), want the second ping", calls, got)
	}
	if w.due != seen+6_100 {
		t.Fatalf("after the second ping, unanswered: due %d, want its activity timeout (6100)", w.due-seen)
	}
	w.sweep(seen + 6_100)
	if w.due != seen+34_100 || c.closing {
		t.Fatalf("not answered by then: due %d, closing %v; want the pong timeout (34100), open", w.due-seen, c.closing)
	}
}
