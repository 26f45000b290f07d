package main

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/metrics"
)

// clusterBus is the node's connection to its cluster bus (cluster.*); without cluster.url
// the node is alone and it is off. It starts before the hub and stops after it: the hub's
// last unsubscribes go through the bus.
type clusterBus struct {
	cfg    ClusterConfig
	reg    *metrics.Registry
	prefix string // of the metrics
	log    *slog.Logger

	hub atomic.Pointer[hub.Hub] // set by carry: the bus's goroutines read it
	c   *cluster                // set by start; nil when off
}

func newClusterBus(c ClusterConfig, reg *metrics.Registry, prefix string, log *slog.Logger) *clusterBus {
	b := &clusterBus{cfg: c, reg: reg, prefix: prefix, log: log}
	return b
}

// start connects to the bus. It returns even when the bus is unreachable: the engine keeps
// trying, and the node serves its own clients meanwhile.
func (b *clusterBus) start() error {
	if b.cfg.URL == "" {
		return nil
	}
	c, err := startCluster(b.cfg, b.toHub, b.reg, b.prefix, b.log)
	if err != nil {
		b.log.Error("start cluster bus", "err", err)
		return err
	}
	b.c = c
	if !c.Connected() {
		b.log.Warn("cluster bus unreachable at start: serving this node's clients, retrying in the background",
			"engine", c.engine, "url", c.url.redacted)
	}
	return nil
}

// carry connects h to the bus, once h is started and before it serves: the bus hands it the
// other nodes' messages, and it publishes through the bus. Nothing comes before: the hub
// takes its interests on the bus in UseBroker.
func (b *clusterBus) carry(h *hub.Hub) {
	if b.c == nil {
		return
	}
	b.hub.Store(h)
	h.UseBroker(b.c.Broker)
}

func (b *clusterBus) toHub(msg herald.BusMessage) {
	if h := b.hub.Load(); h != nil {
		h.Receive(msg)
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

// health is the bus's part of /health: nil when off.
func (b *clusterBus) health() *httpapi.ClusterHealth {
	if b.c == nil {
		return nil
	}
	return b.c.health()
}
