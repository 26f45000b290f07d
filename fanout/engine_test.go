package fanout_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// patience bounds every wait: generous, for busy machines.
const patience = 20 * time.Second

var frames = fanout.Config{
	Ping:     []byte("ping;"),
	Slow:     fanout.Close{Code: 4100, Frame: []byte("slow;")},
	PongLost: fanout.Close{Code: 4201, Frame: []byte("pong;")},
}

func newEngine(tb testing.TB, cfg fanout.Config) *fanout.Engine {
	tb.Helper()
	cfg.Ping, cfg.Slow, cfg.PongLost = frames.Ping, frames.Slow, frames.PongLost
	e := fanout.New(cfg, nil)
	tb.Cleanup(e.Stop)
	return e
}

// rec is a transport that keeps what it is written, and whether it was shut down and closed.
type rec struct {
	mu           sync.Mutex
	buf          bytes.Buffer
	shut, closed bool
	stall        chan struct{} // when set, Writev waits for it to close
}

func (r *rec) Writev(bufs [][]byte) (int, bool, error) {
	if r.stall != nil {
		<-r.stall
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range bufs {
		r.buf.Write(b)
		n += len(b)
	}
	return n, false, nil
}
func (r *rec) Shutdown()    { r.mu.Lock(); r.shut = true; r.mu.Unlock() }
func (r *rec) Close() error { r.mu.Lock(); r.closed = true; r.mu.Unlock(); return nil }
func (r *rec) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// attach claims, inits and attaches a connection of g writing to t.
func attach(e *fanout.Engine, g *fanout.Group, t fanout.Transport) *fanout.Conn {
	c := &fanout.Conn{}
	e.Claim()
	g.Claim()
	e.Init(c, g)
	e.Attach(c, t)
	return c
}

// TestDispatchOrderAndExclusion: what is dispatched to a channel reaches each subscriber once,
// in order, after its subscription frame; the excluded connection and non-subscribers get
// nothing; an unsubscribed connection gets nothing more.
func TestDispatchOrderAndExclusion(t *testing.T) {
	e := newEngine(t, fanout.Config{Workers: 3})
	g := e.NewGroup("app", fanout.Latencies{})
	ch, other := e.NewChannel(), e.NewChannel()
	var rs [5]*rec
	var cs [5]*fanout.Conn
	for i := range rs {
		rs[i] = &rec{}
		cs[i] = attach(e, g, rs[i])
	}
	for _, c := range cs[:4] {
		e.Subscribe(c, &ch, []byte("sub;"), []byte("extra;"))
	}
	e.Subscribe(cs[4], &other, []byte("sub;"), nil)
	e.Dispatch(&ch, []byte("1;"), 0, nil, fanout.Measure{})
	e.Dispatch(&ch, []byte("2;"), cs[1].Num(), nil, fanout.Measure{})
	e.Unsubscribe(cs[3], &ch)
	e.Dispatch(&ch, []byte("3;"), 0, nil, fanout.Measure{})
	e.Sync()
	want := []string{"sub;extra;1;2;3;", "sub;extra;1;3;", "sub;extra;1;2;3;", "sub;extra;1;2;", "sub;"}
	for i, r := range rs {
		if got := r.String(); got != want[i] {
			t.Errorf("connection %d got %q, want %q", i, got, want[i])
		}
	}
	if cs[0].ID() == cs[1].ID() || e.Local(cs[2].ID()) != cs[2].Num() || e.Local("1.2") != 0 {
		t.Errorf("socket ids %q %q; Local(%q) = %d, want %d", cs[0].ID(), cs[1].ID(), cs[2].ID(), e.Local(cs[2].ID()), cs[2].Num())
	}
}

// TestReserveAllOrNothing: while a worker's queue is full, Reserve takes nothing and says
// CodeBusy after the publish timeout; once it drains, Reserve takes every slot, Dispatch
// uses them, Release gives back the rest, and no slot stays held.
func TestReserveAllOrNothing(t *testing.T) {
	const inbox = 4
	e := newEngine(t, fanout.Config{Workers: 2, InboxSize: inbox, PublishTimeout: 50 * time.Millisecond})
	g := e.NewGroup("app", fanout.Latencies{})
	ch := e.NewChannel()
	stall := &rec{stall: make(chan struct{})}
	for range 2 { // one on each worker
		e.Subscribe(attach(e, g, &rec{}), &ch, []byte("sub;"), nil)
	}
	e.Sync()
	sc := attach(e, g, stall)
	released := false
	defer func() {
		if !released {
			close(stall.stall)
		}
	}()
	e.Send(sc, []byte("x")) // its worker blocks in the write
	var s fanout.Slots
	for busy := false; !busy; {
		s.Reset(e)
		s.Want(&ch)
		err := e.Reserve(&s)
		switch herald.CodeOf(err) {
		case herald.CodeBusy:
			busy = true
		case 0:
			e.Dispatch(&ch, []byte("fill;"), 0, &s, fanout.Measure{})
			e.Release(&s)
		default:
			t.Fatal(err)
		}
	}
	held := e.HeldSlots()
	close(stall.stall)
	released = true
	e.Sync()
	poll.Until(t, patience, "every slot given back", func() (bool, string) {
		h := e.HeldSlots()
		return h[0] == 0 && h[1] == 0, fmt.Sprint(h)
	})
	t.Logf("slots held while refused: %v", held)
	s.Reset(e)
	for range inbox {
		s.Want(&ch)
	}
	if err := e.Reserve(&s); err != nil {
		t.Fatalf("reserving a full queue's worth on idle workers: %v", err)
	}
	e.Dispatch(&ch, []byte("a;"), 0, &s, fanout.Measure{})
	e.Release(&s)
	e.Sync()
	if h := e.HeldSlots(); h[0] != 0 || h[1] != 0 {
		t.Fatalf("slots held once idle: %v", h)
	}
}

// TestSlowConsumerClosed: a connection whose queue passes its bound is closed with the Slow
// frame and code, counted, and nothing more is queued for it.
func TestSlowConsumerClosed(t *testing.T) {
	e := newEngine(t, fanout.Config{Workers: 1, OutboundBufferBytes: 64})
	g := e.NewGroup("app", fanout.Latencies{})
	ch := e.NewChannel()
	r := &rec{stall: make(chan struct{})}
	c := attach(e, g, r)
	e.Subscribe(c, &ch, []byte("sub;"), nil)
	for range 10 { // queued behind the stalled write, past 64 bytes
		e.Dispatch(&ch, bytes.Repeat([]byte("x"), 20), 0, nil, fanout.Measure{})
	}
	close(r.stall)
	e.Sync()
	if got := r.String(); !bytes.HasSuffix([]byte(got), []byte("slow;")) {
		t.Fatalf("the slow consumer got %q; want it to end with the slow frame", got)
	}
	if c.CloseCode() != 4100 || e.SlowConsumers() != 1 || g.Counters()[0].Slow.Load() != 1 {
		t.Fatalf("close code %d, slow consumers %d; want 4100 and 1", c.CloseCode(), e.SlowConsumers())
	}
}

// TestDrainClosesEveryConnection: Drain closes every connection with its frame and code,
// including one attached after it began, and returns once they have all hung up; Hangup
// uncounts each once.
func TestDrainClosesEveryConnection(t *testing.T) {
	e := newEngine(t, fanout.Config{Workers: 2})
	g := e.NewGroup("app", fanout.Latencies{})
	var rs []*rec
	var cs []*fanout.Conn
	for range 4 {
		r := &rec{}
		rs, cs = append(rs, r), append(cs, attach(e, g, r))
	}
	d := fanout.Close{Code: 4200, Frame: []byte("bye;")}
	done := make(chan error, 1)
	go func() { done <- e.Drain(context.Background(), d) }()
	poll.Until(t, patience, "the drain to begin", func() (bool, string) { return e.Draining(), "" })
	late := &rec{}
	rs, cs = append(rs, late), append(cs, attach(e, g, late))
	for i, r := range rs {
		poll.Until(t, patience, fmt.Sprintf("connection %d shut down with the drain frame", i), func() (bool, string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.shut && r.buf.String() == "bye;", r.buf.String()
		})
		if cs[i].CloseCode() != 4200 {
			t.Fatalf("connection %d: close code %d, want 4200", i, cs[i].CloseCode())
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Drain returned (%v) with every connection still attached", err)
	default:
	}
	for _, c := range cs {
		e.Hangup(c)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("Drain did not return once every connection hung up")
	}
	if e.Conns() != 0 || g.Conns() != 0 || !rs[0].closed {
		t.Fatalf("after the hang-ups: %d connections, %d in the group, closed %v", e.Conns(), g.Conns(), rs[0].closed)
	}
}

// TestDispatchAllocatesNothing pins the hot path: a dispatch with nothing measured allocates
// nothing, whatever the number of subscribers.
func TestDispatchAllocatesNothing(t *testing.T) {
	for _, n := range []int{1, 1000} {
		e, ch := subscribed(t, n)
		frame := []byte("frame;")
		dispatch := func() {
			e.Dispatch(ch, frame, 0, nil, fanout.Measure{})
			e.Sync()
		}
		for range 10 {
			dispatch()
		}
		if a := testing.AllocsPerRun(200, dispatch); a != 0 {
			t.Fatalf("a dispatch to %d subscribers allocates %v times", n, a)
		}
	}
}

// subscribed is an engine of 2 workers with n connections, writing to nothing, on one
// channel.
func subscribed(tb testing.TB, n int) (*fanout.Engine, *fanout.Channel) {
	e := newEngine(tb, fanout.Config{Workers: 2})
	g := e.NewGroup("app", fanout.Latencies{})
	ch := e.NewChannel()
	for range n {
		e.Subscribe(attach(e, g, discard{}), &ch, nil, nil)
	}
	e.Sync()
	return e, &ch
}

type discard struct{}

func (discard) Writev(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n, false, nil
}
func (discard) Shutdown()    {}
func (discard) Close() error { return nil }

// BenchmarkDispatch is the engine's part of a broadcast: one shared frame to n subscribers
// of one channel, written to transports that take it at once, until every worker is done.
func BenchmarkDispatch(b *testing.B) {
	for _, n := range []int{1, 1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			e, ch := subscribed(b, n)
			frame := bytes.Repeat([]byte("x"), 150)
			b.ReportAllocs()
			for b.Loop() {
				e.Dispatch(ch, frame, 0, nil, fanout.Measure{})
				e.Sync()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
		})
	}
}
