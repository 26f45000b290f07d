package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/metrics"
)

// fdReserve is how many descriptors a node keeps for itself (listeners, epoll, logs, the
// runtime's own) below the open-file limit, besides its HTTP connections.
const fdReserve = 100

// serve runs a node until SIGINT or SIGTERM, or only validates the configuration.
func serve(args []string, env func(string) string, stderr io.Writer, checkOnly bool) int {
	cfg, err := LoadConfig(args, env)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "herald: %v\n", err)
		return 2
	}
	if checkOnly {
		fmt.Fprintln(stderr, "herald: configuration is valid")
		return 0
	}
	log := newLogger(cfg.Log, stderr)
	capacity, httpConns, fdLimit := capacityOf(cfg.MaxConnections, cfg.MaxHTTPConnections, sideConns(cfg))
	if httpConns < cfg.MaxHTTPConnections {
		log.Warn("max_http_connections lowered to leave half the descriptors to WebSocket clients",
			"max_http_connections", httpConns, "configured", cfg.MaxHTTPConnections, "open_file_limit", fdLimit)
	}
	apps := herald.NewStaticApps(cfg.HeraldApps())
	var appIDs []string
	for _, a := range apps.Apps() {
		appIDs = append(appIDs, a.ID)
	}
	reg := metrics.New(cfg.Metrics.Prefix, appIDs)
	version := buildVersion()
	reg.BuildInfo(cfg.Metrics.Prefix, version)

	var mem *guard.Memory
	if cfg.Memory.RefuseAbovePercent > 0 {
		mem, err = guard.NewMemory(guard.MemoryConfig{
			Limit:       uint64(cfg.Memory.LimitBytes),
			RefuseAbove: float64(cfg.Memory.RefuseAbovePercent) / 100,
			AcceptBelow: float64(cfg.Memory.AcceptBelowPercent) / 100,
		}, log)
		if err != nil {
			log.Error("memory guard", "err", err)
			return 1
		}
		mem.Start()
		defer mem.Close()
	}
	var ipRate *guard.IPRate
	if cfg.ConnectionRatePerIP > 0 {
		burst := cfg.ConnectionBurstPerIP
		if burst == 0 {
			burst = cfg.ConnectionRatePerIP
		}
		ipRate = guard.NewIPRate(guard.Rate{PerSecond: float64(cfg.ConnectionRatePerIP), Burst: float64(burst)})
	}
	h, err := hub.New(hub.Config{
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
		Memory:              mem,
		IPRate:              ipRate,
		PublishLatency:      hubObservers(reg.PublishLatency),
		OriginLatency:       hubObservers(reg.IngestLatency(cfg.Metrics.Prefix)),
	}, apps.Apps(), log)
	if err != nil {
		log.Error("start hub", "err", err)
		return 1
	}
	reg.Attach(cfg.Metrics.Prefix, hubMetrics{h})
	var bus *cluster
	if cfg.Cluster.URL != "" {
		if cfg.Cluster.NodeID == "" {
			cfg.Cluster.NodeID = newNodeID()
		}
		bus, err = startCluster(cfg.Cluster, h.Receive, reg, cfg.Metrics.Prefix, log)
		if err != nil {
			log.Error("start cluster bus", "err", err)
			_ = h.Shutdown(context.Background())
			return 1
		}
		h.UseBroker(bus.Broker)
		if !bus.Connected() {
			log.Warn("cluster bus unreachable at start: serving this node's clients, retrying in the background",
				"engine", bus.engine, "url", bus.url.redacted)
		}
	}
	hooks := startWebhooks(cfg, h, reg, log)
	// stopHub shuts the hub down, then sends the webhooks that leaves raised and disconnects
	// from the bus: the hub's last unsubscribes go through the broker, so the broker outlives it.
	stopHub := func(ctx context.Context) error {
		err := h.Shutdown(ctx)
		stopWebhooks(ctx, hooks, cfg, log)
		if bus != nil {
			bctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Duration)
			defer cancel()
			bus.close(bctx, log)
		}
		return err
	}
	nodeID := cfg.Cluster.NodeID
	if nodeID == "" {
		nodeID = newNodeID()
	}
	ing, err := startIngest(cfg, nodeID, h, apps, reg, log)
	if err != nil {
		log.Error("start ingest", "err", err)
		_ = stopHub(context.Background())
		return 1
	}
	// Sources stop before the hub: each commits what it handed on, then leaves its group.
	stopHubOnly := stopHub
	stopHub = func(ctx context.Context) error {
		ing.close(ctx, log)
		return stopHubOnly(ctx)
	}
	leave := notifyLeaving()
	defer leave.stop()
	health := func() httpapi.HealthReport {
		st := h.Stats()
		r := httpapi.HealthReport{Status: "ok", Connections: httpapi.Capacity{Current: st.Connections, Max: st.MaxConnections},
			Channels: st.Channels, Version: version}
		if bus != nil {
			r.Cluster = bus.health()
		}
		r.Ingest = ing.health()
		switch {
		case st.Draining || leave.draining():
			r.Status = "draining"
		case st.Refusing:
			r.Status = "refusing"
		case r.Cluster != nil && !r.Cluster.Connected:
			r.Status = "bus_down"
		}
		return r
	}
	api := httpapi.New(httpapi.Config{TimestampWindow: cfg.RESTTimestampWindow.Duration, ReplayProtection: cfg.RESTReplayProtection},
		apps, h, health, reg.HTTP, log)

	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("listen", "addr", addr, "err", err)
		_ = stopHub(context.Background())
		return 1
	}
	port := httpapi.NewPort(ln, httpapi.PortConfig{
		Name:           "api",
		MaxConns:       httpConns,
		HeaderTimeout:  cfg.HandshakeTimeout.Duration,
		RequestTimeout: cfg.RESTRequestTimeout.Duration,
		IdleTimeout:    cfg.RESTIdleTimeout.Duration,
	}, log)
	ln = port
	srv := port.Server(api)
	exportPort(reg, cfg.Metrics.Prefix, port)
	con := startConsole(cfg, h, api.TrustedEvents, bus, log)
	side, err := startSideListeners(cfg, reg, con, log)
	if err != nil {
		log.Error("listen", "err", err)
		con.Close()
		ln.Close()
		_ = stopHub(context.Background())
		return 1
	}
	defer side.close()
	defer con.Close() // first: it ends the console's streams, which side.close waits for
	if cfg.UsedDefaultApp() {
		for _, a := range cfg.Apps {
			if a.Key == devApp.Key && a.Secret == devApp.Secret {
				log.Warn("DEVELOPMENT CREDENTIALS: this app uses the public built-in credentials; configure your own for production",
					"app_id", a.ID, "key", a.Key, "secret", a.Secret)
			}
		}
	}
	start := []any{"addr", ln.Addr().String(), "websocket", "ws://" + ln.Addr().String() + "/app/{key}",
		"max_connections", capacity, "max_http_connections", httpConns, "open_file_limit", fdLimit, "workers", h.Workers(), "version", version,
		"apps", refsOf(apps.Apps())}
	if bus != nil {
		start = append(start, bus.logAttr())
	}
	log.Info("herald listening", start...)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case sig := <-leave.signalled():
		leave.drain(sig, cfg.Shutdown.DrainDelay.Duration, func() int64 { return h.Stats().Connections }, log)
	case err := <-serveErr:
		log.Error("serve", "err", err)
		_ = stopHub(context.Background())
		return 1
	}
	log.Info("shutting down: closing connections with 4200", "connections", h.Stats().Connections, "deadline", cfg.ShutdownTimeout.Duration)
	con.Close() // its pages first: they would only watch the connections go
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Duration)
	defer cancel()
	// Both at once: srv.Shutdown waits for HTTP requests in progress (and up to 5 s for a
	// connection that has not sent one), which must not use up the deadline before the
	// WebSocket clients get their 4200.
	hubDone := make(chan error, 1)
	go func() { hubDone <- stopHub(sctx) }()
	_ = srv.Shutdown(sctx)
	if err := <-hubDone; err != nil {
		log.Warn("shutdown deadline passed", "err", err, "connections", h.Stats().Connections)
	}
	log.Info("stopped")
	return 0
}

// capacityOf shares the open-file limit out: fdReserve for the process itself, sideConns for
// the metrics and pprof listeners, httpConns (at most half of what is left) for the public
// port's HTTP connections, and the rest for WebSocket connections. It returns the WebSocket
// capacity (the configured limit capped by that share), the HTTP cap and the limit.
func capacityOf(configured, httpConns, sideConns int) (capacity, httpCap, fdLimit int) {
	fdLimit = openFileLimit()
	left := max(fdLimit-fdReserve-sideConns, 2)
	httpCap = max(min(httpConns, left/2), 1)
	capacity = max(left-httpCap, 1)
	if configured > 0 && configured < capacity {
		capacity = configured
	}
	return capacity, httpCap, fdLimit
}

// exportPort publishes the public port's connection counts as metrics.
func exportPort(reg *metrics.Registry, prefix string, port *httpapi.Port) {
	stat := func(f func(httpapi.PortStats) int64) func() float64 {
		return func() float64 { return float64(f(port.Stats())) }
	}
	reg.GaugeFunc(prefix+"http_connections", "Connections of the API port in their HTTP phase (REST, health, upgrades not yet handed over).", nil,
		stat(func(s httpapi.PortStats) int64 { return int64(s.Open) }))
	reg.GaugeFunc(prefix+"max_http_connections", "Most connections the API port holds in their HTTP phase (max_http_connections).", nil,
		stat(func(s httpapi.PortStats) int64 { return int64(s.Max) }))
	evicted := "HTTP connections closed to make room for a new one: the longest idle keep-alive one, else the one reading its request longest (slow-loris)."
	reg.CounterFunc(prefix+"http_connections_evicted_total", evicted, map[string]string{"reason": "idle"},
		stat(func(s httpapi.PortStats) int64 { return s.EvictedIdle }))
	reg.CounterFunc(prefix+"http_connections_evicted_total", evicted, map[string]string{"reason": "slow"},
		stat(func(s httpapi.PortStats) int64 { return s.EvictedBusy }))
	reg.CounterFunc(prefix+"http_connections_refused_total", "New HTTP connections closed unserved because every connection was being served.", nil,
		stat(func(s httpapi.PortStats) int64 { return s.Refused }))
	reg.CounterFunc(prefix+"http_accept_fd_shortages_total", "Accepts on the API port that failed for want of a file descriptor.", nil,
		stat(func(s httpapi.PortStats) int64 { return s.FDShortages }))
}

// newLogger builds the logger c configures, writing to w. Durations are written as Go
// durations ("10s") in both formats; JSON would otherwise write nanoseconds.
func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationString is a slog ReplaceAttr that writes a time.Duration as its String.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// appRef names an app in the start line: its id and key, never its secret.
type appRef struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// appRefs is the start line's list of apps; JSON logs get objects, text logs "id (key k)".
type appRefs []appRef

func (l appRefs) String() string {
	parts := make([]string, len(l))
	for i, a := range l {
		parts[i] = a.ID + " (key " + a.Key + ")"
	}
	return strings.Join(parts, ", ")
}

func refsOf(apps []*herald.App) appRefs {
	refs := make(appRefs, len(apps))
	for i, a := range apps {
		refs[i] = appRef{ID: a.ID, Key: a.Key}
	}
	return refs
}
