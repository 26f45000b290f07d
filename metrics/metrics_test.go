package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/metrics"
)

// value returns the value of the series name{label=val}, and whether it exists.
func value(t *testing.T, fams []*dto.MetricFamily, name, label, val string) (float64, bool) {
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

// expect fails the test for each series absent from fams or of another value.
func expect(t *testing.T, fams []*dto.MetricFamily, want []series) {
	t.Helper()
	for _, w := range want {
		if got, ok := value(t, fams, w.name, w.label, w.val); !ok || got != w.want {
			t.Errorf("%s{%s=%q} = %v (present %v), want %v", w.name, w.label, w.val, got, ok, w.want)
		}
	}
}

func TestMetricsReflectTheHub(t *testing.T) {
	app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
	reg := metrics.New("herald_", []string{"a1"})
	h, err := hub.New(hub.Config{Workers: 2, MaxConnections: 50, PublishLatency: reg.PublishLatency}, []*herald.App{app}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	reg.Attach("herald_", h)

	c, addr := serveHub(t, h, "k1", "prices")
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
	reg.HTTP.Call("a1", 100, 20)
	reg.HTTP.Call("unknown", 1, 1)

	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	expect(t, fams, []series{
		{"herald_connected", "app_id", "a1", 1},
		{"herald_new_connections_total", "app_id", "a1", 1},
		{"herald_new_disconnections_total", "app_id", "a1", 0},
		{"herald_ws_messages_sent_total", "app_id", "a1", 3}, // connection_established, subscription_succeeded, tick
		{"herald_ws_messages_received_total", "app_id", "a1", 1},
		{"herald_http_calls_received_total", "app_id", "a1", 1},
		{"herald_http_received_bytes", "app_id", "a1", 100},
		{"herald_http_transmitted_bytes", "app_id", "a1", 20},
		{"herald_channels", "app_id", "a1", 1},
		{"herald_subscriptions", "app_id", "a1", 1},
		{"herald_refused_connections_total", "reason", "app_not_found", 1},
		{"herald_refused_connections_total", "reason", "memory", 0},
		{"herald_publish_latency_seconds", "app_id", "a1", 1},
		{"herald_max_connections", "", "", 50},
		{"herald_memory_guard_refusing", "", "", 0},
		{"herald_fanout_queue_depth", "worker", "1", 0},
	})
	for _, name := range []string{"herald_socket_transmitted_bytes", "herald_socket_received_bytes"} {
		if v, ok := value(t, fams, name, "app_id", "a1"); !ok || v <= 0 {
			t.Errorf("%s = %v, %v; want > 0", name, v, ok)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if _, ok := value(t, fams, name, "", ""); !ok {
			t.Errorf("%s missing", name)
		}
	}

	// The text endpoint serves the same, with another prefix where configured.
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), `herald_connected{app_id="a1"} 1`) {
		t.Fatalf("metrics text lacks herald_connected:\n%.2000s", body)
	}
}

func TestPrefixIsConfigurable(t *testing.T) {
	reg := metrics.New("soketi_", []string{"x"})
	h, err := hub.New(hub.Config{Workers: 1}, []*herald.App{{ID: "x", Key: "kx", Secret: "s", Limits: herald.DefaultLimits}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	reg.Attach("soketi_", h)
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := value(t, fams, "soketi_connected", "app_id", "x"); !ok {
		t.Fatal("soketi_connected missing with prefix soketi_")
	}
	if _, ok := value(t, fams, "herald_connected", "app_id", "x"); ok {
		t.Fatal("herald_connected present with prefix soketi_")
	}
}

func TestPprofHandler(t *testing.T) {
	rec := httptest.NewRecorder()
	metrics.PprofHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/goroutine?debug=1", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "goroutine profile") {
		t.Fatalf("pprof goroutine: %d %.200s", rec.Code, rec.Body.String())
	}
}
