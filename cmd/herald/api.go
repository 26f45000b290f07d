package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/ws"
)

// apiPort is the public port: the REST API, /health and /ready, and the WebSocket upgrades
// the server takes over. It starts after the server and the ingest sources it reports on, and
// stops alongside them (see serve).
type apiPort struct {
	cfg     config.Config
	fd      fdShare
	apps    *appStore
	node    *sessionServer
	bus     *clusterBus
	ingest  *ingestSources
	certs   *tlsCerts // TLS on the port, when on
	leave   *leaving
	reg     *metrics.Registry
	version string
	log     *slog.Logger

	api    *httpapi.Server                // set by start
	ready  atomic.Pointer[httpapi.Server] // api once started, for the metrics listener's /health
	srv    *http.Server
	served chan error // Serve's return
}

func newAPIPort(cfg config.Config, fd fdShare, apps *appStore, node *sessionServer, bus *clusterBus, ingest *ingestSources,
	certs *tlsCerts, leave *leaving, reg *metrics.Registry, version string, log *slog.Logger) *apiPort {
	return &apiPort{cfg: cfg, fd: fd, apps: apps, node: node, bus: bus, ingest: ingest, certs: certs, leave: leave, reg: reg, version: version, log: log,
		served: make(chan error, 1)}
}

// start listens, logs the start line and serves.
func (p *apiPort) start() error {
	if p.fd.httpConns < p.cfg.MaxHTTPConnections {
		p.log.Warn("max_http_connections lowered to leave half the descriptors to WebSocket clients",
			"max_http_connections", p.fd.httpConns, "configured", p.cfg.MaxHTTPConnections, "open_file_limit", p.fd.limit)
	}
	p.api = httpapi.New(httpapi.Config{TimestampWindow: p.cfg.RESTTimestampWindow.Duration, ReplayProtection: p.cfg.RESTReplayProtection,
		ReplayMaxPerApp: p.cfg.RESTReplayMaxPerApp},
		p.apps.apps(), p.node.h, p.health, p.reg.HTTP, p.log)
	addr := net.JoinHostPort(p.cfg.Host, strconv.Itoa(p.cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.log.Error("listen", "addr", addr, "err", err)
		return err
	}
	port := httpapi.NewPort(ln, httpapi.PortConfig{
		Name:           "api",
		MaxConns:       p.fd.httpConns,
		HeaderTimeout:  p.cfg.HandshakeTimeout.Duration,
		RequestTimeout: p.cfg.RESTRequestTimeout.Duration,
		IdleTimeout:    p.cfg.RESTIdleTimeout.Duration,
		Spare:          func() int { return p.fd.spare(p.node.h.Connections()) },
	}, p.log)
	p.srv = port.Server(withClientFiles(p.api, p.version))
	exportPort(p.reg, p.cfg.Metrics.Prefix, port)
	p.warnDevCredentials()
	p.logStart(port.Addr().String())
	var serve net.Listener = port
	if p.certs.on() {
		// TLS over the port's own accounting: a connection counts from its accept, before
		// its handshake, and the handshake must finish within the request deadline.
		serve = ws.NewTLSListener(port, p.certs.config())
	}
	go func() { p.served <- p.srv.Serve(serve) }()
	// Only now does the metrics listener's /health answer: the port listens and the start
	// line is out, as the public /health would say.
	p.ready.Store(p.api)
	return nil
}

// failed delivers Serve's error, should it return before stop.
func (p *apiPort) failed() <-chan error { return p.served }

// stop closes the listener and waits for the requests in progress within ctx. The server
// closes the WebSocket connections, which http.Server.Shutdown does not track.
func (p *apiPort) stop(ctx context.Context) error { return p.srv.Shutdown(ctx) }

// health is what /health (both ports') and /ready report.
func (p *apiPort) health() httpapi.HealthReport {
	st := p.node.h.Stats()
	r := httpapi.HealthReport{Status: "ok", Connections: httpapi.Capacity{Current: st.Connections, Max: st.MaxConnections},
		Channels: st.Channels, Version: p.version, Cluster: p.bus.health(), Ingest: p.ingest.health(), AppStore: p.apps.health()}
	switch {
	case st.Draining || p.leave.draining():
		r.Status = "draining"
	case st.Refusing:
		r.Status = "refusing"
	case r.Cluster != nil && !r.Cluster.Connected:
		r.Status = "bus_down"
	}
	return r
}

// warnDevCredentials warns of each app that uses the public built-in credentials.
func (p *apiPort) warnDevCredentials() {
	if !p.cfg.UsedDefaultApp() {
		return
	}
	for _, a := range p.cfg.Apps {
		if config.IsDevApp(a) {
			p.log.Warn("DEVELOPMENT CREDENTIALS: this app uses the public built-in credentials; configure your own for production",
				"app_id", a.ID, "key", a.Key, "secret", a.Secret)
		}
	}
}

// logStart logs the start line: where the node listens, its capacity and apps, its bus.
func (p *apiPort) logStart(addr string) {
	scheme := "ws://"
	if p.certs.on() {
		scheme = "wss://"
	}
	attrs := []any{"addr", addr, "websocket", scheme + addr + "/app/{key}",
		"max_connections", p.fd.capacity, "max_http_connections", p.fd.httpConns, "open_file_limit", p.fd.limit,
		"workers", p.node.h.Workers(), "version", p.version, "connection_rate_per_ip", p.ipRate()}
	if apps := p.apps.apps().Apps(); len(apps) <= 20 {
		attrs = append(attrs, "apps", refsOf(apps))
	} else {
		attrs = append(attrs, "apps", len(apps))
	}
	attrs = p.bus.c.startLine(attrs)
	p.log.Info("herald listening", attrs...)
}

// ipRate describes connection_rate_per_ip for the start line.
func (p *apiPort) ipRate() string {
	if p.cfg.ConnectionRatePerIP == 0 {
		return "off"
	}
	return fmt.Sprintf("%d/s, burst %d", p.cfg.ConnectionRatePerIP, cmp.Or(p.cfg.ConnectionBurstPerIP, p.cfg.ConnectionRatePerIP))
}

// detailedHealth answers the metrics listener's /health: the whole report (the bus and its
// nodes, the app store, the ingest sources and their errors, the version), of which the
// public /health gives the status and the counts only. 503 until the port started.
func (p *apiPort) detailedHealth(w http.ResponseWriter, r *http.Request) {
	api := p.ready.Load()
	if api == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"starting"}` + "\n"))
		return
	}
	api.DetailedHealth(w, r)
}
