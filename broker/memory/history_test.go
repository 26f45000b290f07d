package memory_test

import (
	"context"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/historytest"
	"github.com/herald-rt/herald/broker/memory"
)

func TestHistoryConformance(t *testing.T) { historytest.Run(t, newHistoryCluster) }

func newHistoryCluster(t testing.TB, nodes []historytest.Node) historytest.Cluster {
	bus := memory.NewBus()
	c := historytest.Cluster{Ordered: true, Lose: func(testing.TB) { bus.LoseHistory() }}
	for _, n := range nodes {
		b := bus.Attach(memory.Config{NodeID: n.ID}, n.Handler)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		c.Brokers = append(c.Brokers, b)
		c.Histories = append(c.Histories, memory.NewHistory(b))
	}
	c.Reopen = func(_ testing.TB, i int) herald.History { return memory.NewHistory(c.Brokers[i].(*memory.Broker)) }
	return c
}

func BenchmarkHistoryPublish(b *testing.B) { historytest.BenchmarkPublish(b, newHistoryCluster) }
