package main

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/console"
	"github.com/herald-rt/herald/session"
)

// consolePages is the console (console.*): pages on the metrics listener that read the
// server, observe every app's activity (off until a page watches the app), publish through the
// REST API's path and, in a cluster, share their figures on the bus. Off unless
// console.token is set. It starts last and stops first: its pages would only watch the
// connections go.
type consolePages struct {
	cfg   console.Config
	node  *session.Server
	pages *lateHandler // where the metrics listener serves the pages, once started
	log   *slog.Logger

	live *console.Console // the one start started, for stop
}

// newConsolePages configures the console of node's apps (of apps, which admin writes; they
// change when they come from an app store), publishing through publish (the REST API's) and
// sharing its figures on bus. Once started it serves at pages (nil when the console is off).
func newConsolePages(cfg config.Config, node *session.Server, publish func(http.ResponseWriter, *http.Request, string), bus link,
	apps herald.AppStore, admin console.AppAdmin, pages *lateHandler, log *slog.Logger) *consolePages {
	var ids []string
	for _, a := range cfg.Apps {
		ids = append(ids, a.ID)
	}
	cc := console.Config{Token: cfg.Console.Token, Node: cfg.Cluster.NodeID, EventsPerSecond: cfg.Console.EventsPerSecond, Apps: ids,
		Source: consoleSource{node}, Publish: publish, Refresh: node.RefreshObservers, Bus: bus.broker(), Route: bus.route(), Admin: admin,
		SessionLifetime: cfg.Console.SessionLifetime.Duration}
	if cfg.AppStore.On() {
		// An app store's apps change: the page lists them as they are, and an app's
		// observer is attached when a page first watches it.
		cc.Apps = nil
		cc.AppList = func() []string {
			apps := apps.Apps()
			ids := make([]string, len(apps))
			for i, a := range apps {
				ids[i] = a.ID
			}
			return ids
		}
		cc.HasApp = func(id string) bool { _, ok := apps.AppByID(id); return ok }
		cc.Observe = node.Observe
	}
	return &consolePages{cfg: cc, node: node, pages: pages, log: log}
}

// consoleStarting answers for the console's pages until it has started.
func consoleStarting(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "the console is starting", http.StatusServiceUnavailable)
}

// start starts the console's sampler, attaches it to the server and serves its pages.
func (c *consolePages) start() error {
	if c.cfg.Token == "" {
		return nil
	}
	con := console.New(c.cfg, c.log)
	for _, id := range c.cfg.Apps {
		// Off (Wants 0) until a page watches the app: then one atomic load per report.
		if _, err := c.node.Observe(id, con.Observer(id)); err != nil {
			c.log.Error("console: observe", "app_id", id, "err", err)
		}
	}
	c.live = con
	c.pages.set(con)
	return nil
}

// stop stops the sampler and ends every page's stream.
func (c *consolePages) stop(context.Context) error {
	c.live.Close()
	return nil
}

// consoleSource is the server as the console reads it.
type consoleSource struct{ h *session.Server }

func (s consoleSource) Sample() console.Sample {
	ms := s.h.AppMetrics()
	out := console.Sample{Apps: make([]console.AppSample, len(ms)), Refused: map[string]int64{}}
	for i, m := range ms {
		out.Apps[i] = console.AppSample{ID: m.AppID, Connections: m.Connections, Channels: m.Channels, Subscriptions: m.Subscriptions,
			NewConnections: m.NewConnections, MessagesIn: m.MessagesReceived, MessagesOut: m.MessagesSent, SlowConsumers: m.SlowConsumers}
	}
	for r, n := range s.h.Refusals() {
		out.Refused[session.Refusal(r).String()] = n
	}
	return out
}

func (s consoleSource) TopChannels(appID string, n int) ([]console.ChannelCount, int) {
	stats := s.h.Channels(appID, "")
	return topOf(stats, n), len(stats)
}

// topOf returns the n channels with the most subscriptions, most first, ties by name: one
// pass that keeps the n best in order (n is small; an app may have many channels).
func topOf(stats []herald.ChannelStat, n int) []console.ChannelCount {
	better := func(a, b herald.ChannelStat) bool {
		return cmp.Or(cmp.Compare(b.SubscriptionCount, a.SubscriptionCount), cmp.Compare(a.Name, b.Name)) < 0
	}
	best := make([]herald.ChannelStat, 0, n+1)
	for _, st := range stats {
		if len(best) == n && (n == 0 || !better(st, best[n-1])) {
			continue
		}
		i, _ := slices.BinarySearchFunc(best, st, func(x, y herald.ChannelStat) int {
			if better(x, y) {
				return -1
			}
			return 1
		})
		best = slices.Insert(best, i, st)
		if len(best) > n {
			best = best[:n]
		}
	}
	out := make([]console.ChannelCount, len(best))
	for i, st := range best {
		out[i] = console.ChannelCount{Name: st.Name, Subscriptions: st.SubscriptionCount}
	}
	return out
}
