package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

func setupBroadcast(tb testing.TB, subs int) (*Server, []*memTransport) {
	return setupBroadcastWith(tb, subs, Config{Workers: 2})
}

func setupBroadcastWith(tb testing.TB, subs int, cfg Config) (*Server, []*memTransport) {
	h := testServer(tb, cfg)
	ts := make([]*memTransport, subs)
	for i := range ts {
		ts[i] = &memTransport{}
		subscribeFake(tb, h, h.attachFake(ts[i]), "bench")
	}
	h.fence()
	return h, ts
}

var benchEvent = herald.Event{Name: "tick", Channel: "bench", Data: strings.Repeat("x", 100)}

// BenchmarkBroadcast publishes one 100-byte event to N subscribers of one channel and waits
// until every worker has written it (to an in-memory transport: this is the server's own cost,
// without the kernel's).
func BenchmarkBroadcast(b *testing.B) {
	for _, n := range []int{1, 1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			benchBroadcast(b, n, Config{Workers: 2})
		})
	}
}

// BenchmarkBroadcastObserved is BenchmarkBroadcast with the publish latency histogram on, as
// `herald serve` runs it.
func BenchmarkBroadcastObserved(b *testing.B) {
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: prometheus.ExponentialBuckets(10e-6, 2, 19)})
	for _, n := range []int{1, 1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			benchBroadcast(b, n, Config{Workers: 2, PublishLatency: func(string) fanout.Observer { return hist }})
		})
	}
}

// BenchmarkBroadcastOrigin is BenchmarkBroadcastObserved with an ingested event: one with an
// origin, also observed from its origin to its frames queued (herald_ingest_latency_seconds).
func BenchmarkBroadcastOrigin(b *testing.B) {
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: prometheus.ExponentialBuckets(10e-6, 2, 19)})
	origin := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "y", Buckets: prometheus.ExponentialBuckets(100e-6, 2, 20)})
	ev := benchEvent
	ev.Origin = time.Now()
	for _, n := range []int{1, 1000, 10000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			benchBroadcastEvent(b, n, Config{Workers: 2, PublishLatency: func(string) fanout.Observer { return hist },
				OriginLatency: func(string) fanout.Observer { return origin }}, ev)
		})
	}
}

func benchBroadcast(b *testing.B, n int, cfg Config) { benchBroadcastEvent(b, n, cfg, benchEvent) }

func benchBroadcastEvent(b *testing.B, n int, cfg Config, ev herald.Event) {
	h, _ := setupBroadcastWith(b, n, cfg)
	runBroadcast(b, h, n, ev)
}

// runBroadcast publishes ev b.N times on h, whose channel has n subscribers, waiting
// each time until every worker has written it.
func runBroadcast(b *testing.B, h *Server, n int, ev herald.Event) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := h.Publish("app-id", ev); err != nil {
			b.Fatal(err)
		}
		h.fence()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
}

// TestBroadcastAllocatesNothingPerRecipient pins docs/architecture.md rule 2: a broadcast's allocations
// do not grow with the number of recipients (one frame per event, nothing per recipient).
func TestBroadcastAllocatesNothingPerRecipient(t *testing.T) {
	allocs := func(n int) float64 {
		h, ts := setupBroadcast(t, n)
		publish := func() {
			if err := h.Publish("app-id", benchEvent); err != nil {
				t.Fatal(err)
			}
			h.fence()
		}
		for i := 0; i < 10; i++ { // warm the queues up to their steady capacity
			publish()
		}
		a := testing.AllocsPerRun(200, publish)
		want := 0
		for _, tr := range ts {
			want += tr.bytes
		}
		if want == 0 {
			t.Fatal("nothing was delivered")
		}
		return a
	}
	small, large := allocs(10), allocs(2000)
	t.Logf("allocations per publish: %v with 10 subscribers, %v with 2000", small, large)
	if large != small {
		t.Fatalf("allocations grow with recipients: %v for 10, %v for 2000", small, large)
	}
	if large > 2 {
		t.Fatalf("a publish allocates %v times; want at most 2 (the frame)", large)
	}
}

func TestPublishOrderAndExclusion(t *testing.T) {
	h := testServer(t, Config{Workers: 2})
	var ts []*memTransport
	var cs []*conn
	for i := 0; i < 6; i++ {
		tr := &memTransport{}
		c := h.attachFake(tr)
		subscribeFake(t, h, c, "room")
		ts, cs = append(ts, tr), append(cs, c)
	}
	h.fence()
	before := make([]int, len(ts))
	for i, tr := range ts {
		before[i] = tr.bytes
	}
	ev := herald.Event{Name: "e", Channel: "room", Data: "d", SocketID: cs[2].ID()}
	if err := h.Publish("app-id", ev); err != nil {
		t.Fatal(err)
	}
	h.fence()
	for i, tr := range ts {
		got := tr.bytes - before[i]
		if i == 2 && got != 0 {
			t.Fatalf("excluded socket received %d bytes", got)
		}
		if i != 2 && got == 0 {
			t.Fatalf("subscriber %d received nothing", i)
		}
	}
}
