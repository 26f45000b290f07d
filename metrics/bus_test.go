package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/metrics"
)

// TestBusMetrics: two nodes on one in-memory bus; node b subscribes, node a publishes one
// message. Each node's registry reads its broker's counters at scrape time.
func TestBusMetrics(t *testing.T) {
	bus := memory.NewBus()
	got := make(chan herald.BusMessage, 1)
	a := bus.Attach(memory.Config{NodeID: "a"}, func(herald.BusMessage) {})
	b := bus.Attach(memory.Config{NodeID: "b"}, func(m herald.BusMessage) { got <- m })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = a.Close(ctx); _ = b.Close(ctx) })

	regA, regB := metrics.New("herald_", nil), metrics.New("herald_", nil)
	observe := regA.BusRoundTrip("herald_")
	regA.AttachBus("herald_", a)
	regB.AttachBus("herald_", b)

	if err := b.Subscribe(ctx, "app", "room"); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "room", Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("node b never received the message")
	}
	observe(3 * time.Millisecond)
	observe(40 * time.Microsecond)

	check := func(reg *metrics.Registry, node string, want map[string]float64) {
		t.Helper()
		fams, err := reg.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			if v, ok := value(t, fams, name, "", ""); !ok || v != w {
				t.Errorf("node %s: %s = %v (present %v), want %v", node, name, v, ok, w)
			}
		}
	}
	check(regA, "a", map[string]float64{
		"herald_bus_connected": 1, "herald_bus_interests": 0, "herald_bus_messages_sent_total": 1,
		"herald_bus_messages_received_total": 0, "herald_bus_bytes_received_total": 0, "herald_bus_publish_errors_total": 0,
		"herald_bus_dropped_total": 0, "herald_bus_reconnects_total": 0, "herald_bus_round_trip_seconds": 2,
	})
	check(regB, "b", map[string]float64{
		"herald_bus_connected": 1, "herald_bus_interests": 1, "herald_bus_messages_sent_total": 0,
		"herald_bus_messages_received_total": 1, "herald_bus_bytes_sent_total": 0,
	})
	fams, err := regA.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := value(t, fams, "herald_bus_bytes_sent_total", "", ""); v < 5 {
		t.Errorf("herald_bus_bytes_sent_total = %v, want at least the payload's 5 bytes", v)
	}
	for _, f := range fams {
		if f.GetName() != "herald_bus_round_trip_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if b := h.GetBucket(); b[0].GetUpperBound() != 50e-6 || b[0].GetCumulativeCount() != 1 || b[len(b)-1].GetUpperBound() < 5 {
			t.Errorf("round trip buckets %v: want 50µs (holding the 40µs sample) to 5s", b)
		}
	}

	// A failed publish and a lost bus show at the next scrape.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "room"}); err == nil {
		t.Fatal("publish on a closed broker succeeded")
	}
	check(regA, "a", map[string]float64{"herald_bus_connected": 0, "herald_bus_publish_errors_total": 1})
}

// TestNoBusMetricsAlone: a single node exports no bus metric at all.
func TestNoBusMetricsAlone(t *testing.T) {
	fams, err := metrics.New("herald_", []string{"x"}).Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "herald_bus_") {
			t.Errorf("%s exported by a node with no bus", f.GetName())
		}
	}
}

// TestBusMetricsPrefix: the bus metrics take metrics.prefix like the others.
func TestBusMetricsPrefix(t *testing.T) {
	br := memory.New(memory.Config{}, func(herald.BusMessage) {})
	t.Cleanup(func() { _ = br.Close(context.Background()) })
	reg := metrics.New("soketi_", nil)
	reg.BusRoundTrip("soketi_")(time.Millisecond)
	reg.AttachBus("soketi_", br)
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"soketi_bus_connected", "soketi_bus_round_trip_seconds"} {
		if _, ok := value(t, fams, name, "", ""); !ok {
			t.Errorf("%s missing with prefix soketi_", name)
		}
	}
}
