package cluster

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// TestBehindRefusesPublishes: a node whose fan-out queues stay full announces it is behind,
// and every node refuses publishes (CodeBusy, naming it) until it has caught up; then they
// are taken again.
func TestBehindRefusesPublishes(t *testing.T) {
	bus := memory.NewBus()
	a, app := startNode(t, bus, "node-a", false)
	var fill atomic.Uint64 // float64 bits
	eng := fanout.New(fanout.Config{Workers: 1}, nil)
	t.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	bb := bus.Attach(memory.Config{NodeID: "node-b"}, mux.Receive)
	t.Cleanup(func() { _ = bb.Close(context.Background()) })
	b := NewReplicated(Config{Heartbeat: 50 * time.Millisecond, NodeTimeout: 2 * time.Second}, eng, bb, nil, mux.Handle, nil)
	b.press.fill = func() float64 { return math.Float64frombits(fill.Load()) }
	bapp := b.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), nil)
	b.Start(nopListener{})
	t.Cleanup(func() { b.Stop(context.Background()) })
	ev := herald.Event{Name: "e", Channel: "news", Data: "x"}
	frame := []byte("frame")
	publish := func(r *Replicated, ap *App) error { return r.Publish(ap, ev, frame) }

	poll.Until(t, 10*time.Second, "node-a to hear node-b", func() (bool, string) { return len(a.Nodes()) == 2, "" })
	if err := publish(a, app); err != nil {
		t.Fatalf("a publish on node-a with no node behind: %v", err)
	}
	fill.Store(math.Float64bits(0.9))
	poll.Until(t, 10*time.Second, "node-a to refuse publishes while node-b is behind", func() (bool, string) {
		err := publish(a, app)
		return herald.CodeOf(err) == herald.CodeBusy && strings.Contains(herald.MessageOf(err), "node-b"), herald.MessageOf(err)
	})
	if err := publish(b, bapp); herald.CodeOf(err) != herald.CodeBusy || !strings.Contains(herald.MessageOf(err), "this node") {
		t.Errorf("a publish on node-b while it is behind: %v; want CodeBusy naming this node", err)
	}
	if st := a.Stats(); st.BehindNodes != 1 || st.BehindRefused == 0 {
		t.Errorf("node-a's stats %+v; want 1 node behind and refusals counted", st)
	}
	if st := b.Stats(); !st.Behind {
		t.Errorf("node-b's stats %+v; want Behind", st)
	}
	fill.Store(math.Float64bits(0.1))
	poll.Until(t, 10*time.Second, "node-a to take publishes again once node-b caught up", func() (bool, string) {
		err := publish(a, app)
		return err == nil, herald.MessageOf(err)
	})
	poll.Until(t, 10*time.Second, "node-b to take publishes again", func() (bool, string) {
		err := publish(b, bapp)
		return err == nil, herald.MessageOf(err)
	})
}

// A node is behind once its queues stay past half full for behindFor samples in a row, and
// has caught up once they stay under a quarter as long: peaks and dips do not flip it.
func TestPressureSamples(t *testing.T) {
	var fill float64
	changes := 0
	p := &pressure{fill: func() float64 { return fill }, changed: func() { changes++ }}
	feed := func(f float64, n int) {
		fill = f
		for range n {
			p.sample(time.Now())
		}
	}
	feed(0.9, behindFor-1)
	feed(0.1, 1)
	feed(0.9, behindFor-1)
	if p.behind.Load() {
		t.Fatal("behind after peaks shorter than behindFor samples")
	}
	feed(0.9, 1)
	feed(0.6, behindFor)
	if !p.behind.Load() || changes != 1 {
		t.Fatalf("behind %v after %d samples past half full (%d changes); want behind, one change", p.behind.Load(), behindFor, changes)
	}
	feed(0.3, 3*behindFor)
	feed(0.1, behindFor-1)
	if !p.behind.Load() {
		t.Fatal("caught up with queues a quarter full or more, or for fewer than behindFor samples")
	}
	feed(0.1, 1)
	if p.behind.Load() || changes != 2 {
		t.Fatalf("behind %v (%d changes) after behindFor samples under a quarter; want caught up", p.behind.Load(), changes)
	}
}
