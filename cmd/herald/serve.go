package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/internal/runtimechecks"
	"github.com/herald-rt/herald/metrics"
)

// fdReserve is how many descriptors a node keeps for itself (listeners, epoll, logs, the
// runtime's own) below the open-file limit, besides its HTTP connections.
const fdReserve = 100

// serve runs a node until SIGINT or SIGTERM, or only validates the configuration. It
// starts the node's components (see startInstance) and, after the drain, stops them within
// shutdown_timeout.
func serve(args []string, env func(string) string, stderr io.Writer, checkOnly bool) int {
	cfg, err := config.Load(args, env, runtimechecks.Checks())
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
	leave := notifyLeaving()
	defer leave.stop()
	n, err := startInstance(cfg, leave, log)
	if err != nil {
		return 1 // the component logged why; those started before it are stopped
	}
	code := 0
	select {
	case sig := <-leave.signalled():
		leave.drain(sig, cfg.Shutdown.DrainDelay.Duration, n.srv.connections, log)
		log.Info("shutting down: closing connections with 4200", "connections", n.srv.connections(), "deadline", cfg.ShutdownTimeout.Duration)
	case err := <-n.api.failed():
		log.Error("serve", "err", err)
		code = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Duration)
	defer cancel()
	_ = n.stop(ctx) // each component logged what it could not do
	if code == 0 {
		log.Info("stopped")
	}
	return code
}

// fdShare is how the open-file limit is shared out.
type fdShare struct {
	capacity  int // WebSocket connections
	httpConns int // the public port's connections in their HTTP phase
	limit     int // the open-file limit
	wsFDs     int // the descriptors set aside for WebSocket connections (capacity before max_connections)
}

// capacityOf shares the open-file limit out: fdReserve for the process itself, sideConns for
// the metrics and pprof listeners, httpConns (at most half of what is left) for the public
// port's HTTP connections, and the rest for WebSocket connections, capped by the configured
// limit.
func capacityOf(configured, httpConns, sideConns int) fdShare {
	s := fdShare{limit: openFileLimit()}
	left := max(s.limit-fdReserve-sideConns, 2)
	s.httpConns = max(min(httpConns, left/2), 1)
	s.capacity = max(left-s.httpConns, 1)
	s.wsFDs = s.capacity
	if configured > 0 && configured < s.capacity {
		s.capacity = configured
	}
	return s
}

// spare is what the public port may borrow beyond httpConns while connected holds that many
// WebSocket connections: the WebSocket descriptors not in use. The port's connections plus the
// WebSocket ones then stay within httpConns plus wsFDs (an upgrade being handed over, its
// descriptor duplicated, counts in both), and a reconnect storm's upgrades are admitted at
// once instead of waiting behind a full port and being taken for slow requests.
func (s fdShare) spare(connected int64) int {
	return max(s.wsFDs-int(connected), 0)
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
	reg.GaugeFunc(prefix+"http_connections_limit", "Most connections the API port may hold in their HTTP phase now: max_http_connections plus the WebSocket descriptors not in use, which it borrows.", nil,
		stat(func(s httpapi.PortStats) int64 { return int64(s.Limit) }))
	evicted := "HTTP connections closed to make room for a new one: the longest idle keep-alive one, else the one reading its request longest (slow-loris)."
	reg.CounterFunc(prefix+"http_connections_evicted_total", evicted, map[string]string{"reason": "idle"},
		stat(func(s httpapi.PortStats) int64 { return s.EvictedIdle }))
	reg.CounterFunc(prefix+"http_connections_evicted_total", evicted, map[string]string{"reason": "slow"},
		stat(func(s httpapi.PortStats) int64 { return s.EvictedBusy }))
	reg.CounterFunc(prefix+"http_connections_refused_total", "New HTTP connections closed unserved because every connection was being served.", nil,
		stat(func(s httpapi.PortStats) int64 { return s.Refused }))
	reg.CounterFunc(prefix+"http_connections_borrowed_total", "HTTP connections admitted beyond max_http_connections on WebSocket descriptors not in use.", nil,
		stat(func(s httpapi.PortStats) int64 { return s.Borrowed }))
	reg.CounterFunc(prefix+"http_connections_spared_total", "HTTP connections not evicted though reading their request for 100 ms, because its bytes waited unread in the kernel (the node was behind, not the client).", nil,
		stat(func(s httpapi.PortStats) int64 { return s.Spared }))
	reg.CounterFunc(prefix+"http_accept_fd_shortages_total", "Accepts on the API port that failed for want of a file descriptor.", nil,
		stat(func(s httpapi.PortStats) int64 { return s.FDShortages }))
	reg.CounterFunc(prefix+"tls_handshake_failures_total", "Connections to the API port closed because their TLS handshake failed: a plain HTTP request to a TLS port, a client offering no cipher suite or version the port accepts, a handshake cut short.", nil,
		stat(func(s httpapi.PortStats) int64 { return s.TLSHandshakeFailures }))
	reg.CounterFunc(prefix+"http_request_timeouts_total", "HTTP connections closed because a request's headers (handshake_timeout) or body (rest_request_timeout) did not arrive in time.", nil,
		stat(func(s httpapi.PortStats) int64 { return s.TimedOut }))
}

// newLogger builds the logger c configures, writing to w. Durations are written as Go
// durations ("10s") in both formats; JSON would otherwise write nanoseconds.
func newLogger(c config.LogConfig, w io.Writer) *slog.Logger {
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
