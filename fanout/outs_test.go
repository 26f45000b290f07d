package fanout

import (
	"testing"
	"unsafe"
)

// TestIdleConnHoldsNoQueue: a connection seldom written whose queue a write emptied keeps
// no queue array (every idle connection would pay for it), and the next frame takes one
// given back; one written more often keeps its own and allocates nothing; the worker drops
// the arrays left unused for outsKept sweep intervals.
func TestIdleConnHoldsNoQueue(t *testing.T) {
	w, c, tr := idleWorker(t, 0)
	w.now = mono()
	w.enqueue(c, []byte("a;")) // never written before: cold
	w.flushDirty()
	if calls, got := tr.got(); calls != 1 || got != "a;" {
		t.Fatalf("%d writes, %q; want \"a;\" in one", calls, got)
	}
	if c.out != nil || len(w.outs) != 1 {
		t.Fatalf("written: the connection keeps a queue of capacity %d, %d given back; want none kept, one given back", cap(c.out), len(w.outs))
	}
	w.enqueue(c, []byte("b;"))
	if c.out == nil || len(w.outs) != 0 {
		t.Fatalf("a frame queued: queue of capacity %d, %d arrays left given back; want the one given back taken", cap(c.out), len(w.outs))
	}
	w.flushDirty() // written a moment ago: keeps it
	if c.out == nil || len(w.outs) != 0 {
		t.Fatalf("written again at once: queue of capacity %d, %d given back; want it kept", cap(c.out), len(w.outs))
	}
	frame := []byte("b;")
	if a := testing.AllocsPerRun(100, func() {
		w.enqueue(c, frame)
		w.flushDirty()
	}); a != 0 {
		t.Fatalf("a frame queued and written, often, allocates %v times", a)
	}
	w.now += 2 * coldMicros * 1000 // ns: unwritten for longer than coldMicros
	w.enqueue(c, []byte("c;"))
	w.flushDirty()
	if c.out != nil || len(w.outs) != 1 {
		t.Fatalf("written after a while: queue of capacity %d, %d given back; want none kept, one given back", cap(c.out), len(w.outs))
	}
	if w.outsDue == never || w.sweepAt > w.outsDue {
		t.Fatalf("an array given back: ageing due %d, sweep timer at %d; want the timer set for it", w.outsDue, w.sweepAt)
	}
	w.sweep(w.outsDue - 1) // not yet due: not aged
	for range outsKept - 1 {
		w.sweep(w.outsDue) // each time the sweep timer comes back for the arrays
	}
	if len(w.outs) != 1 {
		t.Fatalf("after %d sweeps: %d arrays given back, want 1 (kept)", outsKept-1, len(w.outs))
	}
	w.sweep(w.outsDue)
	if w.outs != nil || w.outsDue != never {
		t.Fatalf("after %d sweeps with none taken: %d arrays kept, want none", outsKept, len(w.outs))
	}
	w.enqueue(c, []byte("d;"))
	w.flushDirty()
	if calls, got := tr.got(); calls != 105 || got[len(got)-4:] != "c;d;" {
		t.Fatalf("%d writes, ending %q; want 105 (AllocsPerRun runs it once more), ending \"c;d;\"", calls, got[len(got)-4:])
	}
}

// TestConnNoSocketID: the connection keeps its number, not its socket id's string (16 bytes
// of header and 16 or more of text every idle connection would pay for); ID makes it.
func TestConnNoSocketID(t *testing.T) {
	if got := unsafe.Sizeof(Conn{}); got > 120 {
		t.Errorf("fanout.Conn is %d bytes, over its budget of 120", got)
	}
	e := New(Config{Workers: 1}, nil)
	t.Cleanup(e.Stop)
	g := e.NewGroup("app", Latencies{})
	var c Conn
	e.Init(&c, g)
	if id, want := c.ID(), e.prefix+".1"; id != want || e.Local(id) != c.Num() {
		t.Fatalf("ID() = %q, want %q (Local %d, Num %d)", id, want, e.Local(id), c.Num())
	}
}

// TestOutsInOrder: the arrays given back are taken in the order given (a fan-out that visits
// its connections in order finds their arrays in order), and giving back and taking one at a
// time with some left neither allocates nor grows the list.
func TestOutsInOrder(t *testing.T) {
	w, _, _ := idleWorker(t, 0)
	arrays := make([][][]byte, 4)
	for i := range arrays {
		arrays[i] = make([][]byte, 0, 1)
		w.giveOut(&Conn{out: arrays[i]})
	}
	for i := range arrays {
		var c Conn
		w.takeOut(&c)
		if unsafe.SliceData(c.out) != unsafe.SliceData(arrays[i]) {
			t.Fatalf("take %d: not the array given back %d-th", i, i)
		}
	}
	if len(w.outs) != 0 {
		t.Fatalf("%d left after taking all", len(w.outs))
	}
	for i := range arrays {
		w.giveOut(&Conn{out: arrays[i]})
	}
	capBefore := cap(w.outs)
	var c Conn
	if a := testing.AllocsPerRun(1000, func() {
		w.takeOut(&c)
		w.giveOut(&c)
	}); a != 0 {
		t.Fatalf("taking and giving back one allocates %v times", a)
	}
	if n := len(w.outs) - w.outsHead; n != len(arrays) || cap(w.outs) != capBefore {
		t.Fatalf("after taking and giving back 1,001 times: %d held, capacity %d; want %d, %d", n, cap(w.outs), len(arrays), capBefore)
	}
}
