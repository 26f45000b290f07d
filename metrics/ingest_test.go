package metrics_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/metrics"
)

// TestIngestMetrics: each source's counters, its lag per partition and whether it is up are
// exported with its name, read at each scrape.
func TestIngestMetrics(t *testing.T) {
	reg := metrics.New("herald_", nil)
	st := ingest.Stats{Name: "trades", Kind: "kafka", State: ingest.StatePaused, Consumed: 10, Published: 8,
		DeadLettered: 1, PublishRetries: 3, CommitErrors: 2, Reclaimed: 0,
		Lag: []ingest.Lag{{Topic: "trades", Partition: 0, Records: 5}, {Topic: "trades", Partition: 1, Records: 7}}}
	st.Bad[ingest.ReasonMissingField] = 2
	down := ingest.Stats{Name: "bids", Kind: "redis_stream", State: ingest.StateDown}
	reg.AttachIngest("herald_", func() []ingest.Stats { return []ingest.Stats{st, down} })
	reg.IngestHandoff("herald_")("trades").Observe(0.002)
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	expect(t, fams, []series{
		{"herald_ingest_records_consumed_total", "source", "trades", 10},
		{"herald_ingest_events_published_total", "source", "trades", 8},
		{"herald_ingest_dead_letters_total", "source", "trades", 1},
		{"herald_ingest_publish_retries_total", "source", "trades", 3},
		{"herald_ingest_commit_errors_total", "source", "trades", 2},
		{"herald_ingest_lag_records", "partition", "1", 7},
		{"herald_ingest_source_up", "source", "trades", 1}, // paused by the hub is no outage
		{"herald_ingest_source_up", "source", "bids", 0},
		{"herald_ingest_handoff_seconds", "source", "trades", 1},
	})
	// Bad records: one series per source and reason.
	bad := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "herald_ingest_bad_records_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetValue() + "/"
			}
			bad[key] = m.Counter.GetValue()
		}
	}
	if len(bad) != 2*len(ingest.Reasons()) || bad["missing_field/trades/"] != 2 || bad["invalid_json/trades/"] != 0 {
		t.Errorf("bad records %v", bad)
	}
}

// TestIngestLatencyFromTheHub: herald_ingest_latency_seconds is what the hub observes for an
// event with an origin, from that origin to its frames queued, by app; an app's series
// appears with its first such event, and events without an origin add nothing.
func TestIngestLatencyFromTheHub(t *testing.T) {
	app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
	reg := metrics.New("herald_", []string{"a1"})
	h, err := hub.New(hub.Config{Workers: 2, OriginLatency: reg.IngestLatency("herald_")}, []*herald.App{app}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	c, _ := serveHub(t, h, "k1", "prices")
	sample := func() (count uint64, sum float64, ok bool) {
		fams, err := reg.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
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
	if _, _, ok := sample(); ok {
		t.Error("an event without an origin made a series")
	}
	if err := h.Publish("a1", herald.Event{Name: "tick", Channel: "prices", Data: "{}", Origin: time.Now().Add(-2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("tick", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the ingested event observed", func() (bool, string) {
		n, sum, ok := sample()
		return ok && n == 1 && sum >= 2 && sum < 60, fmt.Sprintf("count %d sum %v present %v", n, sum, ok)
	})
}

// serveHub serves h's WebSocket endpoint on a free port and returns a client of app key
// subscribed to channel, and the endpoint's address.
func serveHub(t *testing.T, h *hub.Hub, key, channel string) (*wstest.Client, string) {
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
