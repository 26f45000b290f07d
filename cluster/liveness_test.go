package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// queueBus is a bus whose Stats report a queue of received messages as full as queued says.
type queueBus struct {
	herald.Broker
	queued atomic.Int64
}

func (b *queueBus) Stats() herald.BrokerStats {
	st := b.Broker.Stats()
	st.Queued, st.QueueCap = int(b.queued.Load()), 1000
	return st
}

// TestStarvedNodeDeclaresNoneDead: a node that could not hear the others (its queue of
// received messages a quarter full or more, or its heartbeat late by more than a heartbeat:
// paused, starved of CPU) does not declare them dead for their silence, for a node timeout;
// once it hears again and the timeout passes, a silent node is declared dead.
func TestStarvedNodeDeclaresNoneDead(t *testing.T) {
	bus := memory.NewBus()
	eng := fanout.New(fanout.Config{Workers: 1}, nil)
	t.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	mb := bus.Attach(memory.Config{NodeID: "node-a"}, mux.Receive)
	t.Cleanup(func() { _ = mb.Close(context.Background()) })
	qb := &queueBus{Broker: mb}
	a := NewReplicated(Config{Heartbeat: 50 * time.Millisecond, NodeTimeout: 400 * time.Millisecond}, eng, qb, nil, mux.Handle, nil)
	a.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), nil)
	a.Start(nopListener{})
	t.Cleanup(func() { a.Stop(context.Background()) })
	c, _ := startNode(t, bus, "node-c", false)
	poll.Until(t, 10*time.Second, "node-a to hear node-c", func() (bool, string) { return len(a.Nodes()) == 2, "" })
	qb.queued.Store(500)                               // node-a's queue half full: it hears nothing in time
	c.bus.(*memory.Broker).Close(context.Background()) // silent, no goodbye
	deadline := time.Now().Add(2 * time.Second)        // five node timeouts
	for time.Now().Before(deadline) {
		if len(a.Nodes()) != 2 {
			t.Fatalf("node-a declared node-c dead while its own queue was full")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a.stream.live.starved.Load() == 0 {
		t.Fatal("no starved heartbeat counted")
	}
	qb.queued.Store(0)
	poll.Until(t, 10*time.Second, "node-a to declare the silent node-c dead once it keeps up", func() (bool, string) {
		return len(a.Nodes()) == 1, ""
	})
}
