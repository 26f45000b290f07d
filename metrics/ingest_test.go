package metrics_test

import (
	"testing"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/metrics"
)

// TestIngestMetrics: each source's counters, its lag per partition and whether it is up are
// exported with its name, read at each scrape.
func TestIngestMetrics(t *testing.T) {
	reg := metrics.New("herald_", nil)
	st := ingest.Stats{Name: "trades", Kind: "kafka", State: ingest.StatePaused, Consumed: 10, Published: 8,
		DeadLettered: 1, PublishRetries: 3, CommitErrors: 2, Reclaimed: 0, Resent: 4,
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
		{"herald_ingest_resent_total", "source", "trades", 4},
		{"herald_ingest_lag_records", "partition", "1", 7},
		{"herald_ingest_source_up", "source", "trades", 1}, // paused by the node is no outage
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
