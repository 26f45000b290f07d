package brokertest

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// BenchmarkPublish measures one publisher on node0 sending 200-byte messages, one call
// after another as a REST handler would, to node1 subscribed to the channel: an op is one
// Publish, and the clock stops when node1 has received them all. The publisher stays at
// most window messages ahead of node1, so what is measured is the sustained rate, not how
// fast the engine fills its receiver's queue (and then drops).
func BenchmarkPublish(b *testing.B, newCluster NewCluster) {
	var got atomic.Int64
	c := newCluster(b, []Node{{ID: "node0", Handler: func(herald.BusMessage) {}},
		{ID: "node1", Handler: func(herald.BusMessage) { got.Add(1) }}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := c.Brokers[1].Subscribe(ctx, "app", "bench"); err != nil {
		b.Fatal(err)
	}
	m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "bench", ExcludeSocket: "123.456", Payload: make([]byte, 200)}
	b.ReportAllocs()
	b.ResetTimer()
	const window = 10_000
	for i := 0; i < b.N; i++ {
		for int64(i)-got.Load() > window {
			time.Sleep(50 * time.Microsecond) // the receiver is a window behind: let it catch up
		}
		if err := c.Brokers[0].Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(Wait)
	for got.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("node1 received %d of %d messages; dropped: %d", got.Load(), b.N, c.Brokers[1].Stats().Dropped)
		}
		time.Sleep(100 * time.Microsecond) // polling interval
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkPublishFlush measures REST publishes: concurrent callers on node0 each Publish a
// 200-byte message and then Flush, as a REST handler does before it answers, to node1
// subscribed to the channel. An op is one Publish and its Flush; roundtrips/op is the
// round trips node0 made to the bus per op, well below 1 when concurrent Flushes share
// them. Sub-benchmarks vary the number of callers; the clock stops when node1 has received
// every message.
func BenchmarkPublishFlush(b *testing.B, newCluster NewCluster) {
	for _, per := range []int{1, 16, 128} {
		callers := per * runtime.GOMAXPROCS(0)
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			var got, trips atomic.Int64
			c := newCluster(b, []Node{
				{ID: "node0", Handler: func(herald.BusMessage) {}, RoundTrip: func(time.Duration) { trips.Add(1) }},
				{ID: "node1", Handler: func(herald.BusMessage) { got.Add(1) }}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := c.Brokers[1].Subscribe(ctx, "app", "bench"); err != nil {
				b.Fatal(err)
			}
			m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "bench", ExcludeSocket: "123.456", Payload: make([]byte, 200)}
			b.SetParallelism(per)
			b.ReportAllocs()
			trips.Store(0)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.Brokers[0].Publish(ctx, m); err != nil {
						b.Error(err)
						return
					}
					if err := c.Brokers[0].Flush(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			deadline := time.Now().Add(Wait)
			for got.Load() < int64(b.N) {
				if time.Now().After(deadline) {
					b.Fatalf("node1 received %d of %d messages; dropped: %d", got.Load(), b.N, c.Brokers[1].Stats().Dropped)
				}
				time.Sleep(100 * time.Microsecond) // polling interval
			}
			b.StopTimer()
			b.ReportMetric(float64(trips.Load())/float64(b.N), "roundtrips/op")
		})
	}
}
