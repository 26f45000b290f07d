package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-rt/herald/ingest"
)

// ingestBuckets: 100 µs to about 52 s, for a backlog consumed after a restart is old.
var ingestBuckets = prometheus.ExponentialBuckets(100e-6, 2, 20)

// IngestLatency registers <prefix>ingest_latency_seconds, the end-to-end latency of ingested
// events, and returns the observers of each app, for the server (cmd/herald hands them to the
// server's Config.OriginLatency). Call it once, on every node (a node without sources delivers
// the events of the others' too). An app's series appears with its first observation.
func (r *Registry) IngestLatency(prefix string) func(appID string) prometheus.Observer {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    prefix + "ingest_latency_seconds",
		Help:    "Time from an ingested record's timestamp (Kafka: its producer's or the log-append time; Redis streams: the entry id's; Redis pub/sub has none) to the last fan-out worker of this node having queued its event's frame for every local subscriber, by app (not by source: the source is not known past the bus). Observed on every node that delivers the event; clocks of producers and nodes are assumed in sync.",
		Buckets: ingestBuckets,
	}, []string{"app_id"})
	r.reg.MustRegister(h)
	return func(appID string) prometheus.Observer { return &lazyObserver{vec: h, label: appID} }
}

// lazyObserver is one series of a vector, created at its first observation.
type lazyObserver struct {
	once  sync.Once
	vec   *prometheus.HistogramVec
	label string
	obs   prometheus.Observer
}

func (o *lazyObserver) Observe(v float64) {
	o.once.Do(func() { o.obs = o.vec.WithLabelValues(o.label) })
	o.obs.Observe(v)
}

// IngestHandoff registers <prefix>ingest_handoff_seconds and returns the observer of one
// source. Call it once, when the node has sources.
func (r *Registry) IngestHandoff(prefix string) func(source string) ingest.Observer {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    prefix + "ingest_handoff_seconds",
		Help:    "Time from a record's timestamp to its events handed to the node (on a clustered node: flushed to the bus), by source: the part of ingest_latency_seconds spent before the node, where a paused source (the node refusing events) waits.",
		Buckets: ingestBuckets,
	}, []string{"source"})
	r.reg.MustRegister(h)
	return func(source string) ingest.Observer { return h.WithLabelValues(source) }
}

// AttachIngest exports the counters of a node's ingest sources, read from stats at each
// scrape. Call it once, when the node has sources.
func (r *Registry) AttachIngest(prefix string, stats func() []ingest.Stats) {
	r.reg.MustRegister(newIngestCollector(prefix, stats))
}

type ingestCollector struct {
	stats                                            func() []ingest.Stats
	consumed, published, bad, dead, deadErr, retries *prometheus.Desc
	commitErr, reclaimed, resent, lag, up            *prometheus.Desc
}

func newIngestCollector(prefix string, stats func() []ingest.Stats) *ingestCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, help, append([]string{"source"}, labels...), nil)
	}
	return &ingestCollector{
		stats:     stats,
		consumed:  d("ingest_records_consumed_total", "Records fetched from the source and handed to its pipeline."),
		published: d("ingest_events_published_total", "Events the source handed to the node."),
		bad:       d("ingest_bad_records_total", "Records skipped as bad (and committed), by reason.", "reason"),
		dead:      d("ingest_dead_letters_total", "Bad records written to the dead-letter topic or stream."),
		deadErr:   d("ingest_dead_letter_errors_total", "Bad records skipped without a dead letter, its write having failed."),
		retries:   d("ingest_publish_retries_total", "Hand-offs the node refused (its queues full, the bus down), each retried while the source fetches nothing."),
		commitErr: d("ingest_commit_errors_total", "Kafka commits or Redis acknowledgements that failed (those records will be delivered again)."),
		reclaimed: d("ingest_reclaimed_total", "Redis stream entries claimed from consumers idle past claim_idle (XAUTOCLAIM)."),
		resent:    d("ingest_resent_total", "Events handed off again after the node's bus connection was replaced: they may reach subscribers twice, and after later events of their partition or stream."),
		lag:       d("ingest_lag_records", "Records of a partition (Redis: stream) not consumed yet, as of the last fetch.", "topic", "partition"),
		up:        d("ingest_source_up", "1 while the source's broker answers and the source consumes (or waits for the node), else 0."),
	}
}

// Describe implements prometheus.Collector.
func (c *ingestCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.consumed, c.published, c.bad, c.dead, c.deadErr, c.retries, c.commitErr, c.reclaimed, c.resent, c.lag, c.up} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ingestCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.stats() {
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{s.Name}, labels...)...)
		}
		counter(c.consumed, s.Consumed)
		counter(c.published, s.Published)
		for _, r := range ingest.Reasons() {
			counter(c.bad, s.Bad[r], r.String())
		}
		counter(c.dead, s.DeadLettered)
		counter(c.deadErr, s.DeadLetterErrors)
		counter(c.retries, s.PublishRetries)
		counter(c.commitErr, s.CommitErrors)
		counter(c.reclaimed, s.Reclaimed)
		counter(c.resent, s.Resent)
		for _, l := range s.Lag {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(l.Records), s.Name, l.Topic, strconv.Itoa(int(l.Partition)))
		}
		up := 0.0
		if s.Up() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, s.Name)
	}
}
