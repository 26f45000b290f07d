package main

import (
	"cmp"
	"log/slog"
	"net/http"
	"slices"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/console"
	"github.com/herald-rt/herald/hub"
)

// startConsole starts the console when console.token is set (nil otherwise): it reads the
// hub, observes every app's activity (off until a page watches the app), publishes through
// the REST API's path and, in a cluster, shares its figures on the bus (bus may be nil).
func startConsole(cfg Config, h *hub.Hub, publish func(http.ResponseWriter, *http.Request, string), bus *cluster, log *slog.Logger) *console.Console {
	if cfg.Console.Token == "" {
		return nil
	}
	var ids []string
	for _, a := range cfg.Apps {
		ids = append(ids, a.ID)
	}
	cc := console.Config{Token: cfg.Console.Token, Node: cfg.Cluster.NodeID, EventsPerSecond: cfg.Console.EventsPerSecond,
		Apps: ids, Source: consoleSource{h}, Publish: publish, Refresh: h.RefreshObservers}
	if bus != nil {
		cc.Bus, cc.Route = bus.Broker, bus.mux.Handle
	}
	con := console.New(cc, log)
	for _, id := range ids {
		// Off (Wants 0) until a page watches the app: then one atomic load per report.
		if _, err := h.Observe(id, con.Observer(id)); err != nil {
			log.Error("console: observe", "app_id", id, "err", err)
		}
	}
	return con
}

// consoleSource is the hub as the console reads it.
type consoleSource struct{ h *hub.Hub }

func (s consoleSource) Sample() console.Sample {
	ms := s.h.AppMetrics()
	out := console.Sample{Apps: make([]console.AppSample, len(ms)), Refused: map[string]int64{}}
	for i, m := range ms {
		out.Apps[i] = console.AppSample{ID: m.AppID, Connections: m.Connections, Channels: m.Channels, Subscriptions: m.Subscriptions,
			NewConnections: m.NewConnections, MessagesIn: m.MessagesReceived, MessagesOut: m.MessagesSent, SlowConsumers: m.SlowConsumers}
	}
	for r, n := range s.h.Refusals() {
		out.Refused[hub.Refusal(r).String()] = n
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
