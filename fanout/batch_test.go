package fanout_test

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/herald-rt/herald/fanout"
)

// writes is a transport that counts its Writev calls and keeps what it is written.
type writes struct {
	mu    sync.Mutex
	calls int
	buf   bytes.Buffer
}

func (w *writes) Writev(bufs [][]byte) (int, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	n := 0
	for _, b := range bufs {
		w.buf.Write(b)
		n += len(b)
	}
	return n, false, nil
}
func (w *writes) Shutdown()    {}
func (w *writes) Close() error { return nil }
func (w *writes) got() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls, w.buf.String()
}

// TestBatchOneWritePerConnection: the publishes of one batch, to several channels, reach
// each subscriber in the order they were added, but the excluded connection, in one write
// per connection, however many publishes the batch holds.
func TestBatchOneWritePerConnection(t *testing.T) {
	e := newEngine(t, fanout.Config{Workers: 3})
	g := e.NewGroup("app", fanout.Latencies{})
	a, b := e.NewChannel(), e.NewChannel()
	var ws [6]*writes
	var cs [6]*fanout.Conn
	for i := range ws {
		ws[i] = &writes{}
		cs[i] = attach(e, g, ws[i])
		e.Subscribe(cs[i], &a, nil, nil)
		if i%2 == 0 {
			e.Subscribe(cs[i], &b, nil, nil)
		}
	}
	e.Sync()
	var before [6]int
	for i, w := range ws {
		before[i], _ = w.got()
	}
	batch := e.NewBatch()
	var want [6]string
	for j := range 20 {
		f := "a" + strconv.Itoa(j) + ";"
		excl := uint64(0)
		if j == 3 {
			excl = cs[1].Num()
		}
		batch.Add(&a, []byte(f), excl, fanout.Measure{})
		for i := range want {
			if !(j == 3 && i == 1) {
				want[i] += f
			}
		}
		f = "b" + strconv.Itoa(j) + ";"
		batch.Add(&b, []byte(f), 0, fanout.Measure{})
		for i := 0; i < len(want); i += 2 {
			want[i] += f
		}
	}
	if batch.Len() != 40 {
		t.Fatalf("Len = %d, want 40", batch.Len())
	}
	batch.Send()
	if batch.Len() != 0 {
		t.Fatalf("Len after Send = %d, want 0", batch.Len())
	}
	e.Sync()
	for i, w := range ws {
		calls, got := w.got()
		if got != want[i] {
			t.Errorf("connection %d got %q, want %q", i, got, want[i])
		}
		if calls-before[i] != 1 {
			t.Errorf("connection %d was written %d times for one batch, want 1", i, calls-before[i])
		}
	}
}

// TestBatchAllocatesLittle: a batch of 10 publishes to 1,000 subscribers allocates nothing
// per publish or per subscriber once its lists are recycled.
func TestBatchAllocatesLittle(t *testing.T) {
	e, ch := subscribed(t, 1000)
	frame := []byte("frame;")
	batch := e.NewBatch()
	send := func() {
		for range 10 {
			batch.Add(ch, frame, 0, fanout.Measure{})
		}
		batch.Send()
		e.Sync()
	}
	for range 10 {
		send()
	}
	if a := testing.AllocsPerRun(200, send); a > 1 {
		t.Fatalf("a batch of 10 publishes to 1,000 subscribers allocates %v times", a)
	}
}

// BenchmarkBatch is BenchmarkDispatch with the publishes of a burst sent as one batch.
func BenchmarkBatch(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d/burst=10", n), func(b *testing.B) {
			e, ch := subscribed(b, n)
			frame := bytes.Repeat([]byte("x"), 150)
			batch := e.NewBatch()
			b.ReportAllocs()
			for b.Loop() {
				for range 10 {
					batch.Add(ch, frame, 0, fanout.Measure{})
				}
				batch.Send()
				e.Sync()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(10*n), "ns/delivery")
		})
	}
}

// TestBatchRunsOfOneChannel: consecutive publishes to one channel (what a cluster node
// drains from its bus at once) reach each subscriber in order, each skipping only the
// connection it excludes, with the other channels' publishes between runs in their place.
func TestBatchRunsOfOneChannel(t *testing.T) {
	e := newEngine(t, fanout.Config{Workers: 2})
	g := e.NewGroup("app", fanout.Latencies{})
	a, b := e.NewChannel(), e.NewChannel()
	var ws [4]*writes
	var cs [4]*fanout.Conn
	for i := range ws {
		ws[i] = &writes{}
		cs[i] = attach(e, g, ws[i])
		e.Subscribe(cs[i], &a, nil, nil)
		if i >= 2 {
			e.Subscribe(cs[i], &b, nil, nil)
		}
	}
	e.Sync()
	var before [4]string
	for i, w := range ws {
		_, before[i] = w.got()
	}
	batch := e.NewBatch()
	var want [4]string
	add := func(ch *fanout.Channel, name string, excl int) {
		var num uint64
		if excl >= 0 {
			num = cs[excl].Num()
		}
		batch.Add(ch, []byte(name+";"), num, fanout.Measure{})
		for i := range want {
			if i != excl && (ch == &a || i >= 2) {
				want[i] += name + ";"
			}
		}
	}
	for j, excl := range []int{-1, 0, -1, 2, -1} { // -1: none excluded
		add(&a, "a"+strconv.Itoa(j), excl)
	}
	for j, excl := range []int{-1, -1, 3} {
		add(&b, "b"+strconv.Itoa(j), excl)
	}
	add(&a, "a5", 1)
	add(&a, "a6", -1)
	batch.Send()
	e.Sync()
	for i, w := range ws {
		_, got := w.got()
		if got[len(before[i]):] != want[i] {
			t.Errorf("connection %d got %q, want %q", i, got[len(before[i]):], want[i])
		}
	}
}
