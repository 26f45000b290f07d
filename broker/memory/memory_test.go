package memory_test

import (
	"context"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/memory"
)

func TestConformance(t *testing.T) { brokertest.Run(t, newCluster) }

func newCluster(t testing.TB, nodes []brokertest.Node) brokertest.Cluster {
	bus := memory.NewBus()
	var c brokertest.Cluster
	for _, n := range nodes {
		b := bus.Attach(memory.Config{NodeID: n.ID, QueueSize: n.QueueSize}, n.Handler)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		c.Brokers = append(c.Brokers, b)
	}
	return c
}

func BenchmarkPublish(b *testing.B) { brokertest.BenchmarkPublish(b, newCluster) }

// BenchmarkPublishSingleNode is the cost a single node pays for the bus on every publish.
func BenchmarkPublishSingleNode(b *testing.B) {
	br := memory.New(memory.Config{}, func(herald.BusMessage) {})
	defer br.Close(context.Background())
	ctx := context.Background()
	if err := br.Subscribe(ctx, "app", "ch"); err != nil {
		b.Fatal(err)
	}
	m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: make([]byte, 100)}
	b.ReportAllocs()
	for b.Loop() {
		_ = br.Publish(ctx, m)
	}
}

func TestPublishSingleNodeDoesNotAllocate(t *testing.T) {
	br := memory.New(memory.Config{}, func(herald.BusMessage) {})
	defer br.Close(context.Background())
	m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: make([]byte, 100)}
	if n := testing.AllocsPerRun(1000, func() { _ = br.Publish(context.Background(), m) }); n != 0 {
		t.Errorf("Publish on a single node allocates %.1f times", n)
	}
}
