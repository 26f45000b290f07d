package fanout

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPaceAdapts: a window busy more than paceBusy of the time doubles the delay (from a
// quarter of its bound) up to its bound; one between paceIdle and paceBusy shrinks it a step; one busy less than paceIdle
// (an idle worker) ends it; with no bound there is never a delay.
func TestPaceAdapts(t *testing.T) {
	const ms = int64(time.Millisecond)
	p := pace{max: 2 * ms}
	at := int64(0)
	window := func(busy int64) {
		at += int64(paceWindow)
		p.awake(at-busy, at)
	}
	want := []int64{500_000, 1_000_000, 2_000_000, 2_000_000}
	for i, w := range want {
		window(int64(paceWindow)) // awake the whole window
		if p.delay != w {
			t.Fatalf("busy window %d: delay %v, want %v", i, time.Duration(p.delay), time.Duration(w))
		}
	}
	window(int64(paceWindow) * 3 / 10)
	if p.delay != 2*ms-int64(paceStep) {
		t.Fatalf("after a window busy 30%%: delay %v, want %v", time.Duration(p.delay), time.Duration(2*ms-int64(paceStep)))
	}
	window(int64(paceWindow) / 20)
	if p.delay != 0 {
		t.Fatalf("after a window busy 5%%: delay %v, want 0", time.Duration(p.delay))
	}
	// A window is measured from the last one's end: an hour asleep then a busy moment is idle.
	p.delay = ms
	at += int64(time.Hour)
	p.awake(at-ms, at)
	if p.delay != 0 {
		t.Fatalf("after an idle hour: delay %v, want 0", time.Duration(p.delay))
	}
	off := pace{}
	for range 10 {
		off.awake(0, int64(paceWindow))
	}
	if off.delay != 0 {
		t.Fatalf("no bound: delay %v, want 0", time.Duration(off.delay))
	}
}

// counted is a transport that counts its writes and keeps what it is written.
type counted struct {
	mu    sync.Mutex
	calls int
	buf   strings.Builder
}

func (c *counted) Writev(bufs [][]byte) (int, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	n := 0
	for _, b := range bufs {
		c.buf.Write(b)
		n += len(b)
	}
	return n, false, nil
}
func (c *counted) Shutdown()    {}
func (c *counted) Close() error { return nil }
func (c *counted) got() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.buf.String()
}

// idleWorker returns a worker that no goroutine runs (the test drives it), with a
// connection writing to a counted transport.
func idleWorker(t *testing.T, delay time.Duration) (*worker, *Conn, *counted) {
	e := New(Config{Workers: 1, Ping: []byte("ping")}, nil)
	t.Cleanup(e.Stop)
	w := newWorker(e, 0)
	w.pace.delay = int64(delay)
	tr := &counted{}
	c := &Conn{t: tr, m: &Counters{}, w: w}
	w.conns = append(w.conns, c)
	return w, c, tr
}

// TestHoldRecentlyWritten: on a busy worker, frames for a connection written less than the
// delay ago wait and leave together in one write; a connection not written lately, one
// written longer ago than the delay, a closing one, and any on an idle worker are written at
// once.
func TestHoldRecentlyWritten(t *testing.T) {
	w, c, tr := idleWorker(t, time.Millisecond)
	w.now = mono()
	w.enqueue(c, []byte("a;"))
	w.flushDirty()
	if calls, got := tr.got(); calls != 1 || got != "a;" {
		t.Fatalf("first frame: %d writes, %q; want it written at once", calls, got)
	}
	w.enqueue(c, []byte("b;"))
	w.flushDirty()
	w.enqueue(c, []byte("c;"))
	w.flushDirty()
	if calls, _ := tr.got(); calls != 1 || len(w.held) != 1 {
		t.Fatalf("frames right after a write: %d writes, %d held; want them held", calls, len(w.held))
	}
	w.release()
	if calls, got := tr.got(); calls != 2 || got != "a;b;c;" {
		t.Fatalf("released: %d writes, %q; want the held frames in one write", calls, got)
	}

	w.now += int64(2 * time.Millisecond) // longer ago than the delay
	w.enqueue(c, []byte("d;"))
	w.flushDirty()
	if calls, _ := tr.got(); calls != 3 {
		t.Fatalf("written longer ago than the delay: %d writes, want 3", calls)
	}

	w.enqueue(c, []byte("e;"))
	w.close(c, []byte("bye;"))
	w.flushDirty()
	if calls, got := tr.got(); calls != 4 || !strings.HasSuffix(got, "e;bye;") {
		t.Fatalf("closing: %d writes, %q; want its close written at once", calls, got)
	}

	if calls, _ := tr.got(); c.m.Writes.Load() != int64(calls) {
		t.Fatalf("Writes counted %d, the transport took %d", c.m.Writes.Load(), calls)
	}

	w2, c2, tr2 := idleWorker(t, 0) // an idle worker: no delay
	w2.now = mono()
	for _, f := range []string{"a;", "b;"} {
		w2.enqueue(c2, []byte(f))
		w2.flushDirty()
	}
	if calls, _ := tr2.got(); calls != 2 || len(w2.held) != 0 {
		t.Fatalf("idle worker: %d writes, %d held; want every frame written at once", calls, len(w2.held))
	}
}

// TestHeldReleasedOnTime: a running worker writes what it holds once the delay has passed,
// with no other command to wake it.
func TestHeldReleasedOnTime(t *testing.T) {
	w, c, tr := idleWorker(t, 5*time.Millisecond)
	w.now = mono()
	w.enqueue(c, []byte("a;"))
	w.flushDirty()
	w.enqueue(c, []byte("b;"))
	w.flushDirty()
	if len(w.held) != 1 {
		t.Fatalf("%d held, want 1", len(w.held))
	}
	stop := make(chan struct{})
	go w.run(stop)
	defer func() { close(stop); <-w.done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if calls, got := tr.got(); calls == 2 && got == "a;b;" {
			return
		}
		if time.Now().After(deadline) {
			calls, got := tr.got()
			t.Fatalf("held frame not written: %d writes, %q", calls, got)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSyncWritesHeld: Sync's command writes what the worker holds and what is dirty, so
// that Sync still means every frame queued before it is written.
func TestSyncWritesHeld(t *testing.T) {
	w, c, tr := idleWorker(t, time.Second)
	other := &counted{}
	d := &Conn{t: other, m: &Counters{}, w: w}
	w.conns = append(w.conns, d)
	w.now = mono()
	for _, x := range []*Conn{c, d} {
		w.enqueue(x, []byte("a;"))
	}
	w.flushDirty()
	w.enqueue(c, []byte("b;"))
	w.flushDirty() // c held
	w.enqueue(d, []byte("b;"))
	sc := &Conn{t: &counted{}, m: &Counters{}, w: w}
	w.handle(cmd{op: opSync, c: sc, frame: syncFrame})
	w.flushDirty()
	for i, tr := range []*counted{tr, other} {
		if calls, got := tr.got(); calls != 2 || got != "a;b;" {
			t.Fatalf("connection %d after Sync: %d writes, %q; want a;b; in 2", i, calls, got)
		}
	}
}
