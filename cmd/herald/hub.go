package main

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/metrics"
)

// clientHub is the hub: the WebSocket clients, their channels and the fan-out. It starts
// after the memory guard, the bus and the webhook sender, which it uses, so that they
// outlive it; its stop closes every connection with 4200.
type clientHub struct {
	cfg      hub.Config // but Memory, which the memory guard has once started
	apps     []*herald.App
	mem      *memoryGuard
	bus      *clusterBus
	webhooks *webhookSender
	reg      *metrics.Registry
	prefix   string // of the metrics
	log      *slog.Logger

	h *hub.Hub // set by start
}

// newClientHub configures the hub for at most capacity WebSocket connections.
func newClientHub(cfg Config, capacity int, apps []*herald.App, mem *memoryGuard, bus *clusterBus, webhooks *webhookSender,
	reg *metrics.Registry, log *slog.Logger) *clientHub {
	var ipRate *guard.IPRate
	if cfg.ConnectionRatePerIP > 0 {
		burst := cfg.ConnectionBurstPerIP
		if burst == 0 {
			burst = cfg.ConnectionRatePerIP
		}
		ipRate = guard.NewIPRate(guard.Rate{PerSecond: float64(cfg.ConnectionRatePerIP), Burst: float64(burst)})
	}
	hc := hub.Config{
		Workers:             cfg.Workers,
		ActivityTimeout:     cfg.ActivityTimeout.Duration,
		PongTimeout:         cfg.PongTimeout.Duration,
		OutboundBufferBytes: cfg.OutboundBufferBytes,
		SendBufferBytes:     cmp.Or(cfg.SocketSendBufferBytes, -1), // 0: the kernel's autotuning
		FrameTimeout:        cfg.FrameTimeout.Duration,
		MaxConnections:      capacity,
		MaxMessageBytes:     cfg.MaxMessageBytes,
		HandshakeTimeout:    cfg.HandshakeTimeout.Duration,
		CacheMaxBytes:       cfg.Cache.MaxBytes,
		CacheMaxBytesPerApp: cfg.Cache.MaxBytesPerApp,
		CacheTTL:            cfg.Cache.TTL.Duration,
		ClusterHeartbeat:    cfg.Cluster.Heartbeat.Duration,
		ClusterNodeTimeout:  cfg.Cluster.NodeTimeout.Duration,
		IPRate:              ipRate,
		PublishLatency:      hubObservers(reg.PublishLatency),
		OriginLatency:       hubObservers(reg.IngestLatency(cfg.Metrics.Prefix)),
	}
	return &clientHub{cfg: hc, apps: apps, mem: mem, bus: bus, webhooks: webhooks, reg: reg, prefix: cfg.Metrics.Prefix, log: log}
}

// start starts the hub's workers, exports its metrics, and connects it to the bus and the
// webhook sender.
func (c *clientHub) start() error {
	cfg := c.cfg
	cfg.Memory = c.mem.guard
	h, err := hub.New(cfg, c.apps, c.log)
	if err != nil {
		c.log.Error("start hub", "err", err)
		return err
	}
	c.reg.Attach(c.prefix, hubMetrics{h})
	c.bus.carry(h)
	c.webhooks.watch(h)
	c.h = h
	return nil
}

// stop closes every connection with 4200 and waits for them to go within ctx, then stops
// the hub's goroutines.
func (c *clientHub) stop(ctx context.Context) error {
	err := c.h.Shutdown(ctx)
	if err != nil {
		c.log.Warn("shutdown deadline passed", "err", err, "connections", c.connections())
	}
	return err
}

// connections is how many clients are connected now.
func (c *clientHub) connections() int64 { return c.h.Stats().Connections }
