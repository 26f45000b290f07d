package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
)

// clusterBus is the node's connection to its cluster bus (cluster.*); without cluster.url
// the node is alone and it is off. It starts before the server and stops after it: the
// server's last unsubscribes go through the bus. What the bus brings goes, by kind, to whoever
// registered for it (the node's cluster.State, its console): nothing of it passes through
// here.
type clusterBus struct {
	cfg       config.ClusterConfig
	replicas  int           // history.replicas
	keyWindow time.Duration // publish.idempotency_window
	reg       *metrics.Registry
	prefix    string // of the metrics
	log       *slog.Logger

	c link // what start connected, for stop; alone{} until then
}

// link is the node's tie to the other nodes: a *busLink, or alone{} without a bus.
type link interface {
	// newState is how the node shares its state, configured by cfg (session.NewState).
	newState(cfg cluster.Config, log *slog.Logger) session.NewState
	// route registers, for a kind of message the bus brings, who receives it: nil alone.
	route() func(herald.BusKind, herald.BusHandler)
	// broker is the bus, nil alone.
	broker() herald.Broker
	// store keeps the history channels' events on the bus's server (herald.History): nil
	// alone, where the node keeps its own.
	store() herald.History
	// health is the bus's part of /health: nil alone.
	health() *httpapi.ClusterHealth
	// startLine adds the cluster to the start line's attributes.
	startLine(attrs []any) []any
	// publisher is where the ingest sources publish into h.
	publisher(h *session.Server) ingest.Publisher
	// close disconnects from the bus within ctx, and logs and returns what it could not do.
	close(ctx context.Context, log *slog.Logger) error
}

// alone is a node without a cluster bus: it keeps its state, and its channels' history, to
// itself.
type alone struct{}

func (alone) newState(cfg cluster.Config, _ *slog.Logger) session.NewState {
	return cluster.LocalState(cfg)
}
func (alone) route() func(herald.BusKind, herald.BusHandler) { return nil }
func (alone) broker() herald.Broker                          { return nil }
func (alone) store() herald.History                          { return nil }
func (alone) health() *httpapi.ClusterHealth                 { return nil }
func (alone) startLine(attrs []any) []any                    { return attrs }
func (alone) publisher(h *session.Server) ingest.Publisher   { return h }
func (alone) close(context.Context, *slog.Logger) error      { return nil }

func newClusterBus(cfg config.Config, reg *metrics.Registry, log *slog.Logger) *clusterBus {
	return &clusterBus{cfg: cfg.Cluster, replicas: cfg.History.Replicas, keyWindow: cfg.Publish.IdempotencyWindow.Duration,
		reg: reg, prefix: cfg.Metrics.Prefix, log: log, c: alone{}}
}

// clusterState configures the node's cluster.State (link.newState).
func clusterState(cfg config.Config) cluster.Config {
	return cluster.Config{
		CacheMaxBytes:         cfg.Cache.MaxBytes,
		CacheMaxBytesPerApp:   cfg.Cache.MaxBytesPerApp,
		CacheTTL:              cfg.Cache.TTL.Duration,
		HistoryMaxBytesPerApp: cfg.History.MaxBytesPerApp,
		HistoryLinger:         historyLinger(cfg.History),
		KeyWindow:             cfg.Publish.IdempotencyWindow.Duration,
		MaxKeys:               cfg.Publish.IdempotencyMaxKeys,
		Heartbeat:             cfg.Cluster.Heartbeat.Duration,
		NodeTimeout:           cfg.Cluster.NodeTimeout.Duration,
		Release:               buildVersion(),
		NoBundles:             !cfg.Cluster.Bundles,
	}
}

// start connects to the bus. It returns even when the bus is unreachable: the engine keeps
// trying, and the node serves its own clients meanwhile. It gives the node's link to the
// other nodes: alone{} when off.
func (b *clusterBus) start() (link, error) {
	if b.cfg.URL == "" {
		return b.c, nil
	}
	c, err := startCluster(b.cfg, b.replicas, b.keyWindow, b.reg, b.prefix, b.log)
	if err != nil {
		b.log.Error("start cluster bus", "err", err)
		return nil, err
	}
	b.c = c
	b.reg.AttachClusterVersions(b.prefix, c.versions)
	if !c.Connected() {
		b.log.Warn("cluster bus unreachable at start: serving this node's clients, retrying in the background",
			"engine", c.engine, "url", c.url.Redacted)
	}
	return c, nil
}

// stop disconnects from the bus within ctx.
func (b *clusterBus) stop(ctx context.Context) error { return b.c.close(ctx, b.log) }

// historyLinger is cluster.Config.HistoryLinger of history.linger: -1 for none.
func historyLinger(h config.HistoryConfig) time.Duration {
	if h.Linger.Duration <= 0 {
		return -1
	}
	return h.Linger.Duration
}
