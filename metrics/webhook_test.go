package metrics_test

import (
	"testing"

	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/webhook"
)

type webhookStats []webhook.Stats

func (s webhookStats) Stats() []webhook.Stats { return s }

// TestWebhookMetrics: the sender's counters, read at scrape time, by app and reason.
func TestWebhookMetrics(t *testing.T) {
	reg := metrics.New("x_", nil)
	reg.AttachWebhooks("x_", webhookStats{{AppID: "a", Sent: 5, Failed: 3, Retried: 2, DroppedQueueFull: 7, DroppedExpired: 1,
		DroppedRejected: 4, QueueDepth: 9}})
	latency := reg.WebhookLatency("x_")
	latency("a", 0.02)
	latency("a", 0.3)
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	expect(t, fams, []series{
		{"x_webhook_events_sent_total", "app_id", "a", 5},
		{"x_webhook_requests_failed_total", "app_id", "a", 3},
		{"x_webhook_requests_retried_total", "app_id", "a", 2},
		{"x_webhook_events_dropped_total", "reason", "queue_full", 7},
		{"x_webhook_events_dropped_total", "reason", "expired", 1},
		{"x_webhook_events_dropped_total", "reason", "rejected", 4},
		{"x_webhook_queue_depth", "app_id", "a", 9},
		{"x_webhook_request_seconds", "app_id", "a", 2}, // samples
	})
}
