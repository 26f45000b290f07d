package historytest

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// BenchmarkPublish measures History.Publish of 200-byte events on node0 to node1, subscribed
// to every channel: an op is one Publish (its offset given, its event kept and published),
// and the clock stops when node1 has received them all. Sub-benchmarks vary the concurrent
// callers and the channels they share: one caller on one channel (a REST publisher's
// sequential publishes), many callers on one channel (a hot channel: its publishes are
// serialised), and many callers each on a channel of its own.
func BenchmarkPublish(b *testing.B, newCluster NewCluster) {
	procs := runtime.GOMAXPROCS(0)
	for _, bc := range []struct{ per, channels int }{{0, 1}, {8, 1}, {8, 8 * procs}} {
		name := fmt.Sprintf("callers=1/channels=%d", bc.channels)
		if bc.per > 0 {
			name = fmt.Sprintf("callers=%d/channels=%d", bc.per*procs, bc.channels)
		}
		b.Run(name, func(b *testing.B) { benchPublish(b, newCluster, bc.per, bc.channels) })
	}
}

func benchPublish(b *testing.B, newCluster NewCluster, per, channels int) {
	var got atomic.Int64
	c := newCluster(b, []Node{{ID: "node0", Handler: func(herald.BusMessage) {}},
		{ID: "node1", Handler: func(herald.BusMessage) { got.Add(1) }}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	names := make([]string, channels)
	for i := range names {
		names[i] = "bench-" + strconv.Itoa(i)
		if err := c.Brokers[1].Subscribe(ctx, "app", names[i]); err != nil {
			b.Fatal(err)
		}
	}
	r := herald.HistoryRule{Channels: "*", Size: 100, TTL: time.Minute}
	payload := make([]byte, 200) // shared by every event: never modified
	var sent atomic.Int64
	publishOne := func(channel string) bool {
		const window = 10_000 // the publishers stay at most this far ahead of node1
		var behind time.Time
		for sent.Add(1)-got.Load() > window {
			sent.Add(-1)
			if behind.IsZero() {
				behind = time.Now()
			} else if time.Since(behind) > Wait {
				b.Errorf("node1 stayed %d events behind for %v; dropped: %d", window, Wait, c.Brokers[1].Stats().Dropped)
				return false
			}
			time.Sleep(50 * time.Microsecond) // node1 is a window behind: let it catch up
		}
		m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: channel, ExcludeSocket: "123.456", Payload: payload}
		if _, err := c.Histories[0].Publish(ctx, r, m); err != nil {
			b.Error(err)
			return false
		}
		return true
	}
	b.ReportAllocs()
	b.ResetTimer()
	if per == 0 {
		for i := 0; i < b.N; i++ {
			if !publishOne(names[i%channels]) {
				return
			}
		}
	} else {
		var callers atomic.Int64
		b.SetParallelism(per)
		b.RunParallel(func(pb *testing.PB) {
			channel := names[int(callers.Add(1)-1)%channels]
			for pb.Next() {
				if !publishOne(channel) {
					return
				}
			}
		})
	}
	deadline := time.Now().Add(Wait)
	for got.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("node1 received %d of %d events; dropped: %d", got.Load(), b.N, c.Brokers[1].Stats().Dropped)
		}
		time.Sleep(100 * time.Microsecond) // polling interval
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
