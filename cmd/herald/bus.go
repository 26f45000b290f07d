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
	cfg      config.ClusterConfig
	replicas int // history.replicas
	state    cluster.Config
	reg      *metrics.Registry
	prefix   string // of the metrics
	log      *slog.Logger

	c link // alone{} until start connects a *busLink
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
	return &clusterBus{cfg: cfg.Cluster, replicas: cfg.History.Replicas, reg: reg, prefix: cfg.Metrics.Prefix, log: log, c: alone{}, state: cluster.Config{
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
	}}
}

// start connects to the bus. It returns even when the bus is unreachable: the engine keeps
// trying, and the node serves its own clients meanwhile.
func (b *clusterBus) start() error {
	if b.cfg.URL == "" {
		return nil
	}
	c, err := startCluster(b.cfg, b.replicas, b.state.KeyWindow, b.reg, b.prefix, b.log)
	if err != nil {
		b.log.Error("start cluster bus", "err", err)
		return err
	}
	b.c = c
	b.reg.AttachClusterVersions(b.prefix, c.versions)
	if !c.Connected() {
		b.log.Warn("cluster bus unreachable at start: serving this node's clients, retrying in the background",
			"engine", c.engine, "url", c.url.Redacted)
	}
	return nil
}

// newState is how the node shares its state, once the bus is started: with the other nodes
// through the bus, or on its own without one.
func (b *clusterBus) newState() session.NewState { return b.c.newState(b.state, b.log) }

// route registers, for a kind of message the bus brings, who receives it: nil when off.
func (b *clusterBus) route() func(herald.BusKind, herald.BusHandler) { return b.c.route() }

// stop disconnects from the bus within ctx.
func (b *clusterBus) stop(ctx context.Context) error { return b.c.close(ctx, b.log) }

// broker is the bus, nil when off.
func (b *clusterBus) broker() herald.Broker { return b.c.broker() }

// history is where the history channels' events are kept and given their positions, on the
// bus's server (herald.History): nil when off, where the node keeps its own.
func (b *clusterBus) history() herald.History { return b.c.store() }

// health is the bus's part of /health: nil when off.
func (b *clusterBus) health() *httpapi.ClusterHealth { return b.c.health() }

// historyLinger is cluster.Config.HistoryLinger of history.linger: -1 for none.
func historyLinger(h config.HistoryConfig) time.Duration {
	if h.Linger.Duration <= 0 {
		return -1
	}
	return h.Linger.Duration
}
