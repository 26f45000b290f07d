package main

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
	"github.com/herald-rt/herald/webhook"
)

// webhookSender sends the apps' webhooks (webhooks.* and each app's webhooks); off when no
// app has any. It starts before the server and stops after it, so that it sends the webhooks
// of the server's last leaves (member_removed, channel_vacated) too.
type webhookSender struct {
	apps   []webhook.App
	urls   int
	opts   webhook.Options
	cfg    WebhooksConfig // for the log
	reg    *metrics.Registry
	prefix string // of the metrics
	log    *slog.Logger

	srv atomic.Pointer[session.Server] // set by watch; the sender's goroutines read it
	s   *webhook.Sender                // set by start; nil when off
}

func newWebhookSender(cfg Config, reg *metrics.Registry, log *slog.Logger) *webhookSender {
	w := &webhookSender{apps: cfg.webhookApps(), opts: cfg.webhookOptions(), cfg: cfg.Webhooks, reg: reg, prefix: cfg.Metrics.Prefix, log: log}
	for _, a := range w.apps {
		w.urls += len(a.Webhooks)
	}
	return w
}

// start starts the sender, with its metrics. It sends nothing until watch attaches it to
// the server.
func (w *webhookSender) start() error {
	if w.urls == 0 {
		return nil
	}
	opts := w.opts
	opts.Latency = w.reg.WebhookLatency(w.prefix)
	opts.Sent = func(app string, a *herald.Activity) { w.srv.Load().Report(app, a) } // the console's "webhook sent"
	opts.Present = func(app, channel, user string) bool {
		h := w.srv.Load()
		if user == "" {
			_, occupied := h.Channel(app, channel)
			return occupied
		}
		return slices.Contains(h.Users(app, channel), user)
	}
	w.s = webhook.New(w.apps, opts, w.log)
	w.reg.AttachWebhooks(w.prefix, w.s)
	w.log.Info("webhooks on", "apps", w.s.Apps(), "urls", w.urls, "leave_delay", w.cfg.LeaveDelay.Duration,
		"retry_for", w.cfg.RetryFor.Duration)
	return nil
}

// watch attaches the sender to h as each of its apps' observer, once h is started and
// before it serves: the sender asks h only about what h reported.
func (w *webhookSender) watch(h *session.Server) {
	if w.s == nil {
		return
	}
	w.srv.Store(h)
	for _, id := range w.s.Apps() {
		if _, err := h.Observe(id, w.s.Observer(id)); err != nil {
			w.log.Error("webhooks", "app_id", id, "err", err) // cannot happen: the server has every configured app
		}
	}
}

// stop sends what is queued and stops the sender, within ctx.
func (w *webhookSender) stop(ctx context.Context) error {
	if w.s == nil {
		return nil
	}
	err := w.s.Close(ctx)
	if err != nil {
		w.log.Warn("webhooks", "err", err)
	}
	return err
}
