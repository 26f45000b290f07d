package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
	"github.com/herald-rt/herald/webhook"
)

// webhookSender sends the apps' webhooks (webhooks.*, and each app's webhooks: the file's, or
// the app store's webhooks column); off when the apps come from the file and none has any. It
// starts before the server and stops after it, so that it sends the webhooks of the server's
// last leaves (member_removed, channel_vacated) too. With an app store it follows the apps
// as they change: an app's observer is attached when it gets webhooks and detached when it
// has none left or is deleted.
type webhookSender struct {
	apps    herald.AppStore
	follow  func(func([]herald.AppChange)) // the app store's: tells of every change from now on
	follows bool                           // the apps come from an app store, and change
	opts    webhook.Options
	cfg     config.WebhooksConfig // for the log
	reg     *metrics.Registry
	prefix  string // of the metrics
	log     *slog.Logger

	srv atomic.Pointer[session.Server] // the server watch is told of; the sender's goroutines read it
	s   *webhook.Sender                // the one start started; nil when off

	mu       sync.Mutex        // serialises changes
	detached map[string]func() // app id -> detach of its observer, attached to srv; under mu
}

// newWebhookSender configures the sender of the webhooks of apps, following their changes
// through follow (the app store's) when they come from an app store.
func newWebhookSender(cfg config.Config, apps herald.AppStore, follow func(func([]herald.AppChange)), reg *metrics.Registry, log *slog.Logger) *webhookSender {
	return &webhookSender{apps: apps, follow: follow, follows: cfg.AppStore.On(), opts: webhookOptions(cfg.Webhooks), cfg: cfg.Webhooks,
		reg: reg, prefix: cfg.Metrics.Prefix, log: log, detached: map[string]func(){}}
}

// start starts the sender, with its metrics. It sends nothing until watch attaches it to
// the server: it gives itself as the server's watcher.
func (w *webhookSender) start() (serverWatcher, error) {
	apps, urls := 0, 0
	for _, a := range w.apps.Apps() {
		if len(a.Webhooks) > 0 {
			apps++
			urls += len(a.Webhooks)
		}
	}
	if urls == 0 && !w.follows {
		return w, nil // the file's apps have none, and never will
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
	w.s = webhook.New(nil, opts, w.log)
	w.reg.AttachWebhooks(w.prefix, w.s)
	w.log.Info("webhooks on", "apps", apps, "urls", urls, "follows_app_store", w.follows,
		"leave_delay", w.cfg.LeaveDelay.Duration, "retry_for", w.cfg.RetryFor.Duration)
	return w, nil
}

// watch attaches the sender to h as the observer of each app with webhooks, once h is started
// and before it serves (the sender asks h only about what h reported), then follows the app
// store's changes.
func (w *webhookSender) watch(h *session.Server) {
	if w.s == nil {
		return
	}
	w.srv.Store(h)
	var all []herald.AppChange
	for _, a := range w.apps.Apps() {
		all = append(all, herald.AppChange{New: a})
	}
	w.changed(all)
	w.follow(w.changed)
}

// changed applies changes of the apps to the sender and to what it observes.
func (w *webhookSender) changed(changes []herald.AppChange) {
	h := w.srv.Load()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range changes {
		if c.New == nil {
			w.detach(c.Old.ID)
			w.s.Remove(c.Old.ID)
			continue
		}
		id := c.New.ID
		if !w.s.Set(webhook.App{ID: id, Key: c.New.Key, Secret: c.New.Secret, Webhooks: c.New.Webhooks}) {
			w.detach(id) // none left
			continue
		}
		if w.detached[id] != nil {
			h.RefreshObservers(id) // what it wants may have changed
			continue
		}
		detach, err := h.Observe(id, w.s.Observer(id))
		if err != nil {
			w.log.Error("webhooks", "app_id", id, "err", err) // cannot happen: the server has every app of the store
			continue
		}
		w.detached[id] = detach
	}
}

// detach detaches app id's observer, if attached; w.mu is held.
func (w *webhookSender) detach(id string) {
	if d := w.detached[id]; d != nil {
		d()
		delete(w.detached, id)
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

// webhookOptions is webhooks.* for webhook.New.
func webhookOptions(w config.WebhooksConfig) webhook.Options {
	leave := w.LeaveDelay.Duration
	if leave == 0 {
		leave = -1 // configured as none; the package's zero means its default
	}
	return webhook.Options{BatchInterval: w.BatchInterval.Duration, MaxBatch: w.MaxBatch, LeaveDelay: leave,
		Timeout: w.Timeout.Duration, RetryFor: w.RetryFor.Duration, RetryMaxBackoff: w.RetryMaxBackoff.Duration,
		RetryMinBackoff: min(500*time.Millisecond, w.RetryMaxBackoff.Duration), QueueSize: w.QueueSize}
}
