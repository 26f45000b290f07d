package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-rt/herald/webhook"
)

// WebhookSource is what the webhook collector reads at each scrape (*webhook.Sender).
type WebhookSource interface {
	Stats() []webhook.Stats
}

// WebhookLatency registers <prefix>webhook_request_seconds and returns its observer, for
// webhook.Options.Latency. Call it once, when some app has webhooks.
func (r *Registry) WebhookLatency(prefix string) func(appID string, seconds float64) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: prefix + "webhook_request_seconds",
		Help: "Webhook requests, from sending to the answer's status (or the error): the endpoint's latency.",
		// 1 ms to about 33 s (past the default 10 s timeout).
		Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16),
	}, []string{"app_id"})
	r.reg.MustRegister(h)
	return func(appID string, seconds float64) { h.WithLabelValues(appID).Observe(seconds) }
}

// AttachWebhooks exports the webhook counters of src under prefix, by app.
func (r *Registry) AttachWebhooks(prefix string, src WebhookSource) {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, help, append([]string{"app_id"}, labels...), nil)
	}
	r.reg.MustRegister(&webhookCollector{src: src,
		sent:    d("webhook_events_sent_total", "Webhook events delivered (answered 2xx)."),
		failed:  d("webhook_requests_failed_total", "Webhook requests that failed: an error, a timeout, or an answer other than 2xx."),
		retried: d("webhook_requests_retried_total", "Webhook requests sent again after a failure."),
		dropped: d("webhook_events_dropped_total", "Webhook events dropped: queue_full (the oldest, to make room), expired (retries ran out, or the shutdown deadline came), rejected (a final answer: a 4xx other than 408 and 429, or a 3xx).", "reason"),
		depth:   d("webhook_queue_depth", "Webhook events waiting to be sent (delayed leaves included)."),
	})
}

type webhookCollector struct {
	src                                   WebhookSource
	sent, failed, retried, dropped, depth *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sent, c.failed, c.retried, c.dropped, c.depth} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *webhookCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.src.Stats() {
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{st.AppID}, labels...)...)
		}
		counter(c.sent, st.Sent)
		counter(c.failed, st.Failed)
		counter(c.retried, st.Retried)
		counter(c.dropped, st.DroppedQueueFull, "queue_full")
		counter(c.dropped, st.DroppedExpired, "expired")
		counter(c.dropped, st.DroppedRejected, "rejected")
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(st.QueueDepth), st.AppID)
	}
}
