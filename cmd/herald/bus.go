package main

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
)

// clusterBus is the node's connection to its cluster bus (cluster.*); without cluster.url
// the node is alone and it is off. It starts before the server and stops after it: the
// server's last unsubscribes go through the bus. What the bus brings goes, by kind, to whoever
// registered for it (the node's cluster.State, its console): nothing of it passes through
// here.
type clusterBus struct {
	cfg      ClusterConfig
	replicas int // history.replicas
	state    cluster.Config
	reg      *metrics.Registry
	prefix   string // of the metrics
	log      *slog.Logger

	c   *busLink                           // set by start; nil when off
	rep atomic.Pointer[cluster.Replicated] // the node's State, once built (versions.go)
}

func newClusterBus(cfg Config, reg *metrics.Registry, log *slog.Logger) *clusterBus {
	return &clusterBus{cfg: cfg.Cluster, replicas: cfg.History.Replicas, reg: reg, prefix: cfg.Metrics.Prefix, log: log, state: cluster.Config{
		CacheMaxBytes:         cfg.Cache.MaxBytes,
		CacheMaxBytesPerApp:   cfg.Cache.MaxBytesPerApp,
		CacheTTL:              cfg.Cache.TTL.Duration,
		HistoryMaxBytesPerApp: cfg.History.MaxBytesPerApp,
		HistoryLinger:         cfg.History.linger(),
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
	b.reg.AttachClusterVersions(b.prefix, b.versions)
	if !c.Connected() {
		b.log.Warn("cluster bus unreachable at start: serving this node's clients, retrying in the background",
			"engine", c.engine, "url", c.url.redacted)
	}
	return nil
}

// newState is how the node shares its state, once the bus is started: with the other nodes
// through the bus, or on its own without one.
func (b *clusterBus) newState() session.NewState {
	if b.c == nil {
		return cluster.LocalState(b.state)
	}
	cfg := b.state
	cfg.ValidFrame = b.c.validFrame
	newState := cluster.ReplicatedState(cfg, b.c.Broker, b.history(), b.c.mux.Handle, b.log)
	return func(eng *fanout.Engine) cluster.State {
		st := newState(eng)
		if r, ok := st.(*cluster.Replicated); ok {
			b.rep.Store(r)
		}
		return st
	}
}

// route registers, for a kind of message the bus brings, who receives it: nil when off.
func (b *clusterBus) route() func(herald.BusKind, herald.BusHandler) {
	if b.c == nil {
		return nil
	}
	return b.c.mux.Handle
}

// stop disconnects from the bus within ctx.
func (b *clusterBus) stop(ctx context.Context) error {
	if b.c == nil {
		return nil
	}
	return b.c.close(ctx, b.log)
}

// broker is the bus, nil when off.
func (b *clusterBus) broker() herald.Broker {
	if b.c == nil {
		return nil
	}
	return b.c.Broker
}

// history is where the history channels' events are kept and given their positions, on the
// bus's server (herald.History): nil when off, where the node keeps its own.
func (b *clusterBus) history() herald.History {
	if b.c == nil {
		return nil
	}
	return b.c.history
}

// health is the bus's part of /health: nil when off.
func (b *clusterBus) health() *httpapi.ClusterHealth {
	if b.c == nil {
		return nil
	}
	h := b.c.health()
	h.Nodes, h.FeaturesInUse = b.nodes()
	return h
}
