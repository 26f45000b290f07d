package fanout_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// drip is a socket that takes at most chunk bytes a write and then reports itself full, as a
// client reading slowly does; a goroutine of the test tells the engine it drained again
// (Writable) while the client reads. Stop reading with pause.
type drip struct {
	chunk  int
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	shut   bool
	full   chan struct{} // a write filled it
	paused bool
}

func newDrip(chunk int) *drip { return &drip{chunk: chunk, full: make(chan struct{}, 1)} }

func (d *drip) Writev(bufs [][]byte) (int, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused {
		return 0, true, nil
	}
	d.writes++
	n := 0
	for _, b := range bufs {
		take := min(len(b), d.chunk-n)
		d.buf.Write(b[:take])
		n += take
		if take < len(b) {
			select {
			case d.full <- struct{}{}:
			default:
			}
			return n, true, nil
		}
	}
	return n, false, nil
}
func (d *drip) Shutdown() { d.mu.Lock(); d.shut = true; d.mu.Unlock() }
func (d *drip) Close() error {
	return nil
}
func (d *drip) String() string { d.mu.Lock(); defer d.mu.Unlock(); return d.buf.String() }
func (d *drip) pause(p bool) {
	d.mu.Lock()
	d.paused = p
	d.mu.Unlock()
}

// read tells e that c's socket drained each time a write filled it, until stop closes.
func (d *drip) read(e *fanout.Engine, c *fanout.Conn, stop <-chan struct{}) {
	for {
		select {
		case <-d.full:
			e.Writable(c)
		case <-stop:
			return
		}
	}
}

// frames are n numbered frames of size bytes each: "<prefix><i>;" padded with dots.
func numbered(prefix string, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		f := prefix + strconv.Itoa(i)
		out[i] = []byte(f + strings.Repeat(".", max(size-len(f)-1, 0)) + ";")
	}
	return out
}

func joined(fs ...[][]byte) string {
	var b strings.Builder
	for _, l := range fs {
		for _, f := range l {
			b.Write(f)
		}
	}
	return b.String()
}

// TestReplayLargerThanBound: a replay 40 times the connection's outbound bound reaches a
// client that reads slowly, whole and in order, then its tail, then what was dispatched to
// the channel during the replay, each once; then the live frames go straight on. It is sent
// in pages: the connection never held more than its bound, and it was not closed.
func TestReplayLargerThanBound(t *testing.T) {
	const bound = 4096
	e := newEngine(t, fanout.Config{Workers: 2, OutboundBufferBytes: bound})
	g := e.NewGroup("app", fanout.Latencies{})
	ch := e.NewChannel()
	d := newDrip(700)
	c := attach(e, g, d)
	stop := make(chan struct{})
	defer close(stop)
	go d.read(e, c, stop)

	hist := numbered("h", 1600, 100) // 160 KB
	e.SubscribeReplay(c, &ch, []byte("sub;"), &fanout.Replay{Frames: append([][]byte(nil), hist...), Tail: []byte("tail;")})
	live := numbered("l", 20, 30)
	for _, f := range live[:10] {
		e.Dispatch(&ch, f, 0, nil, fanout.Measure{})
	}
	want := "sub;" + joined(hist) + "tail;" + joined(live[:10])
	poll.Until(t, patience, "the replay, its tail and the frames held behind it", func() (bool, string) {
		got := d.String()
		return len(got) >= len(want), fmt.Sprintf("%d of %d bytes", len(got), len(want))
	})
	for _, f := range live[10:] {
		e.Dispatch(&ch, f, 0, nil, fanout.Measure{})
	}
	want += joined(live[10:])
	poll.Until(t, patience, "the live frames after it", func() (bool, string) {
		got := d.String()
		return len(got) >= len(want), fmt.Sprintf("%d of %d bytes", len(got), len(want))
	})
	if got := d.String(); got != want {
		t.Fatalf("the subscriber got %d bytes, not the replay then the live frames in order (%d bytes); first difference at %d",
			len(got), len(want), firstDiff(got, want))
	}
	if c.CloseCode() != 0 || e.SlowConsumers() != 0 {
		t.Fatalf("close code %d, slow consumers %d: a client that reads was cut", c.CloseCode(), e.SlowConsumers())
	}
	var replayed, pages int64
	for i := range g.Counters() {
		replayed += g.Counters()[i].ReplayedBytes.Load()
		pages += g.Counters()[i].ReplayPages.Load()
	}
	// A page is a quarter of the bound, give or take a frame.
	if most := bound/4 + 100; replayed != int64(len(joined(hist))) || pages < int64(len(joined(hist))/most) {
		t.Fatalf("counted %d bytes replayed in %d pages; want %d bytes in at least %d pages of at most %d bytes",
			replayed, pages, len(joined(hist)), len(joined(hist))/most, most)
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestReplayOthersUnaffected: while one subscriber replays, the channel's other subscribers and
// the replaying connection's other channels get their frames at once, and a frame excluding
// the replaying connection is not held for it.
func TestReplayOthersUnaffected(t *testing.T) {
	e := newEngine(t, fanout.Config{Workers: 1, OutboundBufferBytes: 1 << 20})
	g := e.NewGroup("app", fanout.Latencies{})
	ch, other := e.NewChannel(), e.NewChannel()
	d := newDrip(1 << 30)
	d.pause(true) // holds the replay at its first page
	c := attach(e, g, d)
	peer := &rec{}
	pc := attach(e, g, peer)
	e.Subscribe(pc, &ch, []byte("sub;"), nil)
	e.Subscribe(c, &other, []byte("o-sub;"), nil)
	e.Sync()
	hist := numbered("h", 5000, 100)
	e.SubscribeReplay(c, &ch, []byte("sub;"), &fanout.Replay{Frames: append([][]byte(nil), hist...), Tail: []byte("tail;")})
	e.Dispatch(&ch, []byte("a;"), 0, nil, fanout.Measure{})
	e.Dispatch(&ch, []byte("b;"), c.Num(), nil, fanout.Measure{})
	e.Dispatch(&other, []byte("o1;"), 0, nil, fanout.Measure{})
	e.Sync()
	if got := peer.String(); got != "sub;a;b;" {
		t.Fatalf("the other subscriber got %q during the replay; want sub;a;b;", got)
	}
	d.pause(false)
	e.Writable(c)
	want := "o-sub;sub;" + joined(hist) + "tail;a;"
	poll.Until(t, patience, "the replay's end", func() (bool, string) {
		return strings.HasSuffix(d.String(), "tail;a;"), fmt.Sprintf("%d bytes", len(d.String()))
	})
	got := d.String()
	if strings.Count(got, "o1;") != 1 || strings.Replace(got, "o1;", "", 1) != want {
		t.Fatalf("the replaying connection got %d bytes; want its other channel's frame once and %d bytes in order (excluded frame b; not held)",
			len(got), len(want))
	}
}

// TestReplayNotReadingClosed: a client that stops reading during a replay is closed as a slow
// consumer once the channel's frames held behind the replay pass its bound, or once the replay
// has made no progress for the pong timeout; nothing more is queued for it.
func TestReplayNotReadingClosed(t *testing.T) {
	t.Run("held past the bound", func(t *testing.T) {
		e := newEngine(t, fanout.Config{Workers: 1, OutboundBufferBytes: 2048, PongTimeout: time.Hour})
		g := e.NewGroup("app", fanout.Latencies{})
		ch := e.NewChannel()
		d := newDrip(1 << 30)
		d.pause(true)
		c := attach(e, g, d)
		e.SubscribeReplay(c, &ch, []byte("sub;"), &fanout.Replay{Frames: numbered("h", 100, 100)})
		for _, f := range numbered("l", 40, 100) {
			e.Dispatch(&ch, f, 0, nil, fanout.Measure{})
		}
		e.Sync()
		poll.Until(t, patience, "the slow consumer's close", func() (bool, string) {
			return c.CloseCode() == 4100, strconv.Itoa(c.CloseCode())
		})
		d.pause(false)
		e.Writable(c)
		poll.Until(t, patience, "the slow frame", func() (bool, string) {
			return strings.HasSuffix(d.String(), "slow;"), d.String()
		})
		if strings.Contains(d.String(), "l0") {
			t.Fatalf("a live frame reached the slow consumer before the replay ended: %q", d.String())
		}
	})
	t.Run("stalled", func(t *testing.T) {
		e := newEngine(t, fanout.Config{Workers: 1, OutboundBufferBytes: 2048, PongTimeout: 300 * time.Millisecond,
			SweepInterval: 50 * time.Millisecond, ActivityTimeout: time.Hour})
		g := e.NewGroup("app", fanout.Latencies{})
		ch := e.NewChannel()
		d := newDrip(1 << 30)
		d.pause(true)
		c := attach(e, g, d)
		e.SubscribeReplay(c, &ch, []byte("sub;"), &fanout.Replay{Frames: numbered("h", 100, 100)})
		poll.Until(t, patience, "the stalled replay's close", func() (bool, string) {
			return c.CloseCode() == 4100, strconv.Itoa(c.CloseCode())
		})
		if e.SlowConsumers() != 1 {
			t.Fatalf("slow consumers %d; want 1", e.SlowConsumers())
		}
	})
}

// TestReplayEnds: unsubscribing during a replay ends it (nothing more of it, nor of the
// channel, is queued), a new subscription replays afresh; closing the connection or its
// channel (CloseChannel) during a replay closes it with nothing more queued.
func TestReplayEnds(t *testing.T) {
	e := newEngine(t, fanout.Config{Workers: 1, OutboundBufferBytes: 2048})
	g := e.NewGroup("app", fanout.Latencies{})
	ch := e.NewChannel()
	d := newDrip(1 << 30)
	d.pause(true)
	c := attach(e, g, d)
	hist := numbered("h", 100, 100)
	e.SubscribeReplay(c, &ch, []byte("sub;"), &fanout.Replay{Frames: append([][]byte(nil), hist...), Tail: []byte("tail;")})
	e.Unsubscribe(c, &ch)
	e.Dispatch(&ch, []byte("gone;"), 0, nil, fanout.Measure{})
	e.SubscribeReplay(c, &ch, []byte("sub2;"), &fanout.Replay{Frames: append([][]byte(nil), hist[:3]...), Tail: []byte("tail2;")})
	e.Dispatch(&ch, []byte("live;"), 0, nil, fanout.Measure{})
	e.Sync()
	d.pause(false)
	e.Writable(c)
	poll.Until(t, patience, "the second replay", func() (bool, string) {
		return strings.HasSuffix(d.String(), "tail2;live;"), d.String()
	})
	got := d.String()
	first := got[:strings.Index(got, "sub2;")]
	if strings.Contains(got, "tail;") || strings.Contains(got, "gone;") || !strings.HasPrefix(first, "sub;") ||
		!strings.HasPrefix(joined(hist), first[len("sub;"):]) || !strings.HasSuffix(got, "sub2;"+joined(hist[:3])+"tail2;live;") {
		t.Fatalf("after an unsubscribe during the replay and a new subscription, the connection got %q", got)
	}

	for _, how := range []string{"Close", "CloseChannel"} {
		ch := e.NewChannel()
		d := newDrip(1 << 30)
		d.pause(true)
		c := attach(e, g, d)
		e.SubscribeReplay(c, &ch, []byte("sub;"), &fanout.Replay{Frames: numbered("h", 100, 100), Tail: []byte("tail;")})
		if how == "Close" {
			c.ClosedWith(4009)
			e.Close(c, []byte("bye;"))
		} else {
			e.CloseChannel(&ch, fanout.Close{Code: 4200, Frame: []byte("bye;")})
		}
		e.Dispatch(&ch, []byte("live;"), 0, nil, fanout.Measure{})
		e.Sync()
		d.pause(false)
		e.Writable(c)
		poll.Until(t, patience, how+": the close frame", func() (bool, string) {
			return strings.HasSuffix(d.String(), "bye;"), d.String()
		})
		if got := d.String(); strings.Contains(got, "tail;") || strings.Contains(got, "live;") || len(got) > 2048+len("bye;") {
			t.Fatalf("%s during a replay: the connection got %d bytes, ending %q; want at most its first page and the close", how, len(got), got[max(len(got)-40, 0):])
		}
	}
}

// BenchmarkReplay is a replay of n frames of 1 KiB to one connection that takes every write
// whole: the engine's cost per replayed KiB.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("frames=%d", n), func(b *testing.B) {
			e := newEngine(b, fanout.Config{Workers: 1})
			g := e.NewGroup("app", fanout.Latencies{})
			tail := []byte("t")
			s := &sink{tail: &tail[0], done: make(chan struct{}, 1)}
			c := attach(e, g, s)
			hist := numbered("h", n, 1024)
			frames := make([][]byte, n)
			b.ReportAllocs()
			for b.Loop() {
				ch := e.NewChannel()
				copy(frames, hist)
				e.SubscribeReplay(c, &ch, nil, &fanout.Replay{Frames: frames, Tail: tail})
				<-s.done
				e.Unsubscribe(c, &ch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/KiB")
		})
	}
}

// sink takes every write whole and signals each one that ends with the buffer tail.
type sink struct {
	tail *byte
	done chan struct{}
}

func (s *sink) Writev(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if l := bufs[len(bufs)-1]; len(l) > 0 && &l[0] == s.tail {
		s.done <- struct{}{}
	}
	return n, false, nil
}
func (s *sink) Shutdown()    {}
func (s *sink) Close() error { return nil }
