package main

import (
	"context"
	"log/slog"
	"slices"

	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/webhook"
)

// startWebhooks starts the sender of the apps' webhooks, with its metrics, and attaches it to
// the hub as each such app's observer; nil when no app has webhooks.
func startWebhooks(cfg Config, h *hub.Hub, reg *metrics.Registry, log *slog.Logger) *webhook.Sender {
	apps := cfg.webhookApps()
	n := 0
	for _, a := range apps {
		n += len(a.Webhooks)
	}
	if n == 0 {
		return nil
	}
	opts := cfg.webhookOptions()
	opts.Latency = reg.WebhookLatency(cfg.Metrics.Prefix)
	opts.Sent = h.Report // the console's "webhook sent"
	opts.Present = func(app, channel, user string) bool {
		if user == "" {
			_, occupied := h.Channel(app, channel)
			return occupied
		}
		return slices.Contains(h.Users(app, channel), user)
	}
	s := webhook.New(apps, opts, log)
	reg.AttachWebhooks(cfg.Metrics.Prefix, s)
	for _, id := range s.Apps() {
		if _, err := h.Observe(id, s.Observer(id)); err != nil {
			log.Error("webhooks", "app_id", id, "err", err) // cannot happen: the hub has every configured app
		}
	}
	log.Info("webhooks on", "apps", s.Apps(), "urls", n, "leave_delay", cfg.Webhooks.LeaveDelay.Duration,
		"retry_for", cfg.Webhooks.RetryFor.Duration)
	return s
}

// stopWebhooks sends what is queued and stops the sender, within ctx and the shutdown timeout.
func stopWebhooks(ctx context.Context, s *webhook.Sender, cfg Config, log *slog.Logger) {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ShutdownTimeout.Duration)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		log.Warn("webhooks", "err", err)
	}
}
