package main

import (
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
)

// These tests check the wiring of the node to metrics as serve does it (nodeMetrics,
// observers) against a real session server; what each metric is called and reads is metrics'
// TestSourceExposition.

// TestMetricsFromTheServer: the node's counters, refusals, queues and publish latency, read
// through nodeMetrics at each scrape.
func TestMetricsFromTheServer(t *testing.T) {
	app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
	reg := metrics.New("herald_", []string{"a1"})
	h, err := session.New(session.Config{Workers: 2, MaxConnections: 50, PublishLatency: observers(reg.PublishLatency)}, herald.NewStaticApps([]herald.App{*app}), cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	reg.Attach("herald_", nodeMetrics{h})

	c, addr := serveNode(t, h, "k1", "prices")
	if err := h.Publish("a1", herald.Event{Name: "tick", Channel: "prices", Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("tick", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	refused, err := wstest.Dial(addr, "/app/nope")
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if code, err := refused.ExpectClose(30 * time.Second); err != nil || code != 4001 {
		t.Fatalf("close %d, %v", code, err)
	}

	fams := gather(t, reg)
	expectSeries(t, fams, []series{
		{"herald_connected", "app_id", "a1", 1},
		{"herald_new_connections_total", "app_id", "a1", 1},
		{"herald_new_disconnections_total", "app_id", "a1", 0},
		{"herald_ws_messages_sent_total", "app_id", "a1", 3}, // connection_established, subscription_succeeded, tick
		{"herald_ws_messages_received_total", "app_id", "a1", 1},
		{"herald_channels", "app_id", "a1", 1},
		{"herald_subscriptions", "app_id", "a1", 1},
		{"herald_refused_connections_total", "reason", "app_not_found", 1},
		{"herald_refused_connections_total", "reason", "memory", 0},
		{"herald_publish_latency_seconds", "app_id", "a1", 1},
		{"herald_max_connections", "", "", 50},
		{"herald_memory_guard_refusing", "", "", 0},
		{"herald_node_connections", "", "", 1},
		{"herald_node_channels", "", "", 1},
		{"herald_pong_timeouts_total", "", "", 0},
		{"herald_pongs_unread_total", "", "", 0},
		{"herald_fanout_queue_depth", "worker", "1", 0},
	})
	for _, name := range []string{"herald_socket_transmitted_bytes", "herald_socket_received_bytes"} {
		if v, ok := sample(t, fams, name, "app_id", "a1"); !ok || v <= 0 {
			t.Errorf("%s = %v, %v; want > 0", name, v, ok)
		}
	}
	// nodeMetrics copies each of the node's counters to the field of the same name.
	hm, counters := h.AppMetrics(), nodeMetrics{h}.AppCounters()
	if len(hm) != len(counters) {
		t.Fatalf("%d apps' counters from %d apps", len(counters), len(hm))
	}
	for i := range hm {
		want, got := reflect.ValueOf(hm[i]), reflect.ValueOf(counters[i])
		for f := range got.NumField() {
			name := got.Type().Field(f).Name
			if w := want.FieldByName(name); !w.IsValid() || !w.Equal(got.Field(f)) {
				t.Errorf("app %s: %s = %v, the node's is %v", hm[i].AppID, name, got.Field(f), w)
			}
		}
	}
	// Every reason of the node's has its series.
	for i := range len(h.Refusals()) {
		if _, ok := sample(t, fams, "herald_refused_connections_total", "reason", session.Refusal(i).String()); !ok {
			t.Errorf("herald_refused_connections_total{reason=%q} missing", session.Refusal(i).String())
		}
	}
}

// TestMetricsCacheFromTheServer: three 10 KB events to cache channels where the app's bound
// holds two.
func TestMetricsCacheFromTheServer(t *testing.T) {
	const bound = 24 << 10
	app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
	reg := metrics.New("herald_", []string{"a1"})
	h, err := session.New(session.Config{MaxConnections: 10}, herald.NewStaticApps([]herald.App{*app}), cluster.LocalState(cluster.Config{CacheMaxBytes: 4 * bound, CacheMaxBytesPerApp: bound}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	reg.Attach("herald_", nodeMetrics{h})
	for i := 0; i < 3; i++ {
		if err := h.Publish("a1", herald.Event{Name: "e", Channel: fmt.Sprint("cache-", i), Data: strings.Repeat("x", 10_000)}); err != nil {
			t.Fatal(err)
		}
	}
	fams := gather(t, reg)
	if v, ok := sample(t, fams, "herald_cache_entries", "app_id", "a1"); v != 2 {
		t.Errorf("herald_cache_entries = %v (present %v), want 2", v, ok)
	}
	if v, ok := sample(t, fams, "herald_cache_evictions_total", "app_id", "a1"); v != 1 {
		t.Errorf("herald_cache_evictions_total = %v (present %v), want 1", v, ok)
	}
	if v, ok := sample(t, fams, "herald_cache_bytes", "app_id", "a1"); v < 20_000 || v > bound {
		t.Errorf("herald_cache_bytes = %v (present %v), want two 10 KB events' worth, at most %d", v, ok, bound)
	}
}

// TestMetricsIngestLatencyFromTheServer: herald_ingest_latency_seconds is what the node observes
// for an event with an origin, from that origin to its frames queued, by app; an app's series
// appears with its first such event, and events without an origin add nothing.
func TestMetricsIngestLatencyFromTheServer(t *testing.T) {
	app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
	reg := metrics.New("herald_", []string{"a1"})
	h, err := session.New(session.Config{Workers: 2, OriginLatency: observers(reg.IngestLatency("herald_"))}, herald.NewStaticApps([]herald.App{*app}), cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	c, _ := serveNode(t, h, "k1", "prices")
	latency := func() (count uint64, sum float64, ok bool) {
		for _, f := range gather(t, reg) {
			if f.GetName() == "herald_ingest_latency_seconds" {
				for _, m := range f.GetMetric() {
					if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == "app_id" && m.GetLabel()[0].GetValue() == "a1" {
						return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), true
					}
				}
			}
		}
		return 0, 0, false
	}
	if err := h.Publish("a1", herald.Event{Name: "rest", Channel: "prices", Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("rest", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := latency(); ok {
		t.Error("an event without an origin made a series")
	}
	if err := h.Publish("a1", herald.Event{Name: "tick", Channel: "prices", Data: "{}", Origin: time.Now().Add(-2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("tick", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the ingested event observed", func() (bool, string) {
		n, sum, ok := latency()
		return ok && n == 1 && sum >= 2 && sum < 60, fmt.Sprintf("count %d sum %v present %v", n, sum, ok)
	})
}

// serveNode serves h's WebSocket endpoint on a free port and returns a client of app key
// subscribed to channel, and the endpoint's address.
func serveNode(t *testing.T, h *session.Server, key, channel string) (*wstest.Client, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeWS(w, r, strings.TrimPrefix(r.URL.Path, "/app/"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := wstest.Dial(ln.Addr().String(), "/app/"+key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.SocketID(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(channel, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return c, ln.Addr().String()
}

func gather(t *testing.T, reg *metrics.Registry) []*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample returns the value of the series name{label=val} (a histogram's sample count), and
// whether it exists.
func sample(t *testing.T, fams []*dto.MetricFamily, name, label, val string) (float64, bool) {
	t.Helper()
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == val {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// series is one expected sample: name{label=val} == want.
type series struct {
	name, label, val string
	want             float64
}

// expectSeries fails the test for each series absent from fams or of another value.
func expectSeries(t *testing.T, fams []*dto.MetricFamily, want []series) {
	t.Helper()
	for _, w := range want {
		if got, ok := sample(t, fams, w.name, w.label, w.val); !ok || got != w.want {
			t.Errorf("%s{%s=%q} = %v (present %v), want %v", w.name, w.label, w.val, got, ok, w.want)
		}
	}
}
