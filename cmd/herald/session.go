package main

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
)

// sessionServer is the Pusher server: the WebSocket clients, their channels and the fan-out
// (session, on its fan-out engine and its cluster.State). It starts after the memory guard,
// the bus and the webhook sender, which it uses, so that they outlive it; its stop closes
// every connection with 4200.
type sessionServer struct {
	cfg      session.Config
	apps     herald.AppStore
	state    session.NewState
	watchers []serverWatcher
	reg      *metrics.Registry
	prefix   string // of the metrics
	log      *slog.Logger

	h *session.Server // the one start started, for stop
}

// serverWatcher is told of the server once it has started and before it serves: what
// observes it or tells it of changes (the webhook sender, the app store) attaches then.
type serverWatcher interface {
	watch(h *session.Server)
}

// newSessionServer configures the server for at most capacity WebSocket connections, on the
// apps of apps, refusing connections while mem refuses (nil: no memory guard), sharing its
// state as state builds it (clusterBus's link), and telling watchers of it once started, in
// order.
func newSessionServer(cfg config.Config, capacity int, apps herald.AppStore, mem *guard.Memory, state session.NewState,
	reg *metrics.Registry, log *slog.Logger, watchers ...serverWatcher) *sessionServer {
	var ipRate *guard.IPRate
	if cfg.ConnectionRatePerIP > 0 {
		burst := cfg.ConnectionBurstPerIP
		if burst == 0 {
			burst = cfg.ConnectionRatePerIP
		}
		ipRate = guard.NewIPRate(guard.Rate{PerSecond: float64(cfg.ConnectionRatePerIP), Burst: float64(burst)}, cfg.ConnectionIPv6Prefix)
	}
	sc := session.Config{
		Workers:             cfg.Workers,
		WriteDelay:          cmp.Or(cfg.WriteDelay.Duration, -1), // 0: never hold
		ActivityTimeout:     cfg.ActivityTimeout.Duration,
		PongTimeout:         cfg.PongTimeout.Duration,
		OutboundBufferBytes: cfg.OutboundBufferBytes,
		SendBufferBytes:     cmp.Or(cfg.SocketSendBufferBytes, -1), // 0: the kernel's autotuning
		FrameTimeout:        cfg.FrameTimeout.Duration,
		MaxConnections:      capacity,
		MaxMessageBytes:     cfg.MaxMessageBytes,
		HandshakeTimeout:    cfg.HandshakeTimeout.Duration,
		IPRate:              ipRate,
		ReplayBudget:        replayBudget(cfg.History, cfg.ConnectionIPv6Prefix),
		PublishLatency:      observers(reg.PublishLatency),
		OriginLatency:       observers(reg.IngestLatency(cfg.Metrics.Prefix)),
		History:             cfg.AppStore.HistoryRules(), // none without an app store (config validation)
		Memory:              mem,
	}
	return &sessionServer{cfg: sc, apps: apps, state: state, watchers: watchers, reg: reg, prefix: cfg.Metrics.Prefix, log: log}
}

// start starts the server on the node's state (shared with the other nodes through the bus,
// when there is one), exports its metrics and tells the watchers of it. It gives the server,
// for the components that use it.
func (c *sessionServer) start() (*session.Server, error) {
	h, err := session.New(c.cfg, c.apps, c.state, c.log)
	if err != nil {
		c.log.Error("start session server", "err", err)
		return nil, err
	}
	c.reg.Attach(c.prefix, nodeMetrics{h})
	for _, w := range c.watchers {
		w.watch(h)
	}
	c.h = h
	return h, nil
}

// stop closes every connection with 4200 and waits for them to go within ctx, then stops
// the server's goroutines (and its state's: a clustered node says goodbye to the others).
func (c *sessionServer) stop(ctx context.Context) error {
	err := c.h.Shutdown(ctx)
	if err != nil {
		c.log.Warn("shutdown deadline passed", "err", err, "connections", c.connections())
	}
	return err
}

// connections is how many clients are connected now.
func (c *sessionServer) connections() int64 { return c.h.Stats().Connections }

// replayBudget is the session's replay budget of history.*; addresses are counted as
// connection_rate_per_ip counts them (ipv6Prefix).
func replayBudget(h config.HistoryConfig, ipv6Prefix int) session.ReplayBudget {
	rate := func(n int) guard.Rate { return guard.Rate{PerSecond: float64(n), Burst: replayBurst * float64(n)} }
	return session.ReplayBudget{Node: rate(h.ReplayBytesPerSecond), App: rate(h.ReplayBytesPerSecondPerApp),
		Address: rate(h.ReplayBytesPerSecondPerAddress), Connection: rate(h.ReplayBytesPerSecondPerConnection), IPv6Prefix: ipv6Prefix}
}

// replayBurst is how many seconds' worth of each replay budget a quiet node lets through at
// once: a reconnect storm of 1,000 clients of one app, each missing 1,000 events of 1 KB
// (1.2 GB), recovers whole at the defaults (docs/benchmarks.md); with a burst of 2 s, 240 did.
const replayBurst = 10
