package config

import (
	"fmt"
	"sort"
	"time"

	"github.com/herald-rt/herald"
)

// WebhooksConfig tunes the sending of every app's webhooks (each app lists its own URLs in
// apps[].webhooks).
type WebhooksConfig struct {
	BatchInterval   Duration // events gather this long before a request
	MaxBatch        int      // most events in one request
	LeaveDelay      Duration // channel_vacated and member_removed wait this long; 0 = not at all
	Timeout         Duration // one request, connection included
	RetryFor        Duration // how long a batch is retried after its first attempt
	RetryMaxBackoff Duration // the longest wait between two attempts
	QueueSize       int      // events waiting per webhook URL; past it the oldest are dropped
}

// AppWebhook is one entry of apps[].webhooks: a URL and what is sent there.
type AppWebhook struct {
	URL        string
	EventTypes []string // empty = every event
	Filter     WebhookFilter
	Headers    map[string]string
}

// WebhookFilter keeps the events of channels whose names start and end as given.
type WebhookFilter struct {
	ChannelNameStartsWith string
	ChannelNameEndsWith   string
}

func defaultWebhooks() WebhooksConfig {
	return WebhooksConfig{BatchInterval: Duration{250 * time.Millisecond}, MaxBatch: 100, LeaveDelay: Duration{3 * time.Second},
		Timeout: Duration{10 * time.Second}, RetryFor: Duration{5 * time.Minute}, RetryMaxBackoff: Duration{30 * time.Second}, QueueSize: 10_000}
}

var webhookSettings = []setting{
	{"webhooks.batch_interval", "webhook events gather this long before a request", func(c *Config) any { return &c.Webhooks.BatchInterval }},
	{"webhooks.max_batch", "most events in one webhook request", func(c *Config) any { return &c.Webhooks.MaxBatch }},
	{"webhooks.leave_delay", "channel_vacated and member_removed wait this long (a re-join within it cancels both); 0 = no delay", func(c *Config) any { return &c.Webhooks.LeaveDelay }},
	{"webhooks.timeout", "longest one webhook request may take", func(c *Config) any { return &c.Webhooks.Timeout }},
	{"webhooks.retry_for", "how long a webhook batch is retried (connection errors, timeouts, 408, 429, 5xx) before it is dropped", func(c *Config) any { return &c.Webhooks.RetryFor }},
	{"webhooks.retry_max_backoff", "longest wait between two attempts of a webhook batch", func(c *Config) any { return &c.Webhooks.RetryMaxBackoff }},
	{"webhooks.queue_size", "webhook events waiting per URL; past it the oldest are dropped", func(c *Config) any { return &c.Webhooks.QueueSize }},
}

// decodeWebhooks reads apps[i].webhooks from the file.
func (l *loader) decodeWebhooks(v fileValue, prefix, src string, app *AppConfig) {
	path := prefix + ".webhooks"
	items, err := v.items()
	if err != nil {
		l.fail(path, src, err)
		return
	}
	l.read(path, src)
	app.Webhooks = make([]AppWebhook, len(items))
	for j, item := range items {
		w := &app.Webhooks[j]
		at := fmt.Sprintf("%s[%d]", path, j)
		filter := l.scalars(at+".filter", src, map[string]any{
			"channel_name_starts_with": &w.Filter.ChannelNameStartsWith,
			"channel_name_ends_with":   &w.Filter.ChannelNameEndsWith,
		})
		fields := l.scalars(at, src, map[string]any{"url": &w.URL, "event_types": &w.EventTypes, "headers": &w.Headers})
		fields["filter"] = func(v fileValue) { l.table(v, at+".filter", src, filter) }
		l.table(item, at, src, fields)
	}
}

// webhooks checks webhooks.* and every app's webhooks.
func (l *loader) webhooks(c *Config) {
	w := c.Webhooks
	l.longerThan("webhooks.batch_interval", w.BatchInterval, time.Millisecond)
	l.atLeast("webhooks.max_batch", w.MaxBatch, 1)
	if w.LeaveDelay.Duration < 0 {
		l.problem("webhooks.leave_delay", "%v must not be negative", w.LeaveDelay)
	}
	l.longerThan("webhooks.timeout", w.Timeout, 100*time.Millisecond)
	l.longerThan("webhooks.retry_for", w.RetryFor, 0)
	l.longerThan("webhooks.retry_max_backoff", w.RetryMaxBackoff, 100*time.Millisecond)
	l.atLeast("webhooks.queue_size", w.QueueSize, 1)
	for i, a := range c.Apps {
		for j, h := range a.Webhooks {
			at := fmt.Sprintf("apps[%d].webhooks[%d]", i, j)
			if err := l.check.WebhookURL(h.URL); err != nil {
				l.problem(at+".url", "%v", err)
			}
			for k, t := range h.EventTypes {
				if err := l.check.WebhookEvent(t); err != nil {
					l.problem(fmt.Sprintf("%s.event_types[%d]", at, k), "%v", err)
				}
			}
			names := make([]string, 0, len(h.Headers))
			for n := range h.Headers {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if err := l.check.WebhookHeader(n, h.Headers[n]); err != nil {
					l.problem(at+".headers."+n, "%v", err)
				}
			}
		}
	}
}

// heraldWebhooks is an app's webhooks, for herald.App.
func (a AppConfig) heraldWebhooks() []herald.Webhook {
	var out []herald.Webhook
	for _, h := range a.Webhooks {
		out = append(out, herald.Webhook{URL: h.URL, EventTypes: h.EventTypes, Headers: h.Headers,
			Filter: herald.WebhookFilter{ChannelNameStartsWith: h.Filter.ChannelNameStartsWith, ChannelNameEndsWith: h.Filter.ChannelNameEndsWith}})
	}
	return out
}
