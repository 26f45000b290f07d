package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
	"github.com/herald-rt/herald/ws"
)

// apiPort is the public port: the REST API, /health and /ready, and the WebSocket upgrades
// the server takes over. It starts after the server and the ingest sources it reports on, and
// stops alongside them (see serve).
type apiPort struct {
	cfg      config.Config
	fd       fdShare
	rest     *httpapi.Server // what the port serves
	node     *session.Server
	apps     herald.AppStore
	bus      link        // for the start line
	tls      *tls.Config // TLS on the port; nil when off
	detailed *lateHandler
	reg      *metrics.Registry
	version  string
	log      *slog.Logger

	srv    *http.Server // the one start started, for stop
	served chan error   // Serve's return
}

// newAPIPort configures the port serving rest, for node's WebSocket clients, with TLS when
// tlsConf is not nil; once it listens it sets detailed, the metrics listener's /health.
func newAPIPort(cfg config.Config, fd fdShare, rest *httpapi.Server, node *session.Server, apps herald.AppStore, bus link, tlsConf *tls.Config,
	detailed *lateHandler, reg *metrics.Registry, version string, log *slog.Logger) *apiPort {
	return &apiPort{cfg: cfg, fd: fd, rest: rest, node: node, apps: apps, bus: bus, tls: tlsConf, detailed: detailed, reg: reg, version: version, log: log,
		served: make(chan error, 1)}
}

// restConfig is the REST API's configuration.
func restConfig(cfg config.Config) httpapi.Config {
	return httpapi.Config{TimestampWindow: cfg.RESTTimestampWindow.Duration, ReplayProtection: cfg.RESTReplayProtection,
		ReplayMaxPerApp: cfg.RESTReplayMaxPerApp}
}

// start listens, logs the start line and serves.
func (p *apiPort) start() error {
	if p.fd.httpConns < p.cfg.MaxHTTPConnections {
		p.log.Warn("max_http_connections lowered to leave half the descriptors to WebSocket clients",
			"max_http_connections", p.fd.httpConns, "configured", p.cfg.MaxHTTPConnections, "open_file_limit", p.fd.limit)
	}
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
		Spare:          func() int { return p.fd.spare(p.node.Connections()) },
	}, p.log)
	p.srv = port.Server(withClientFiles(p.rest, p.version))
	exportPort(p.reg, p.cfg.Metrics.Prefix, port)
	p.warnDevCredentials()
	p.logStart(port.Addr().String())
	var serve net.Listener = port
	if p.tls != nil {
		// TLS over the port's own accounting: a connection counts from its accept, before
		// its handshake, and the handshake must finish within the request deadline.
		serve = ws.NewTLSListener(port, p.tls)
	}
	go func() { p.served <- p.srv.Serve(serve) }()
	// Only now does the metrics listener's /health answer: the port listens and the start
	// line is out, as the public /health would say.
	p.detailed.set(http.HandlerFunc(p.rest.DetailedHealth))
	return nil
}

// failed delivers Serve's error, should it return before stop.
func (p *apiPort) failed() <-chan error { return p.served }

// stop closes the listener and waits for the requests in progress within ctx. The server
// closes the WebSocket connections, which http.Server.Shutdown does not track.
func (p *apiPort) stop(ctx context.Context) error { return p.srv.Shutdown(ctx) }

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
	if p.tls != nil {
		scheme = "wss://"
	}
	attrs := []any{"addr", addr, "websocket", scheme + addr + "/app/{key}",
		"max_connections", p.fd.capacity, "max_http_connections", p.fd.httpConns, "open_file_limit", p.fd.limit,
		"workers", p.node.Workers(), "version", p.version, "connection_rate_per_ip", p.ipRate()}
	if apps := p.apps.Apps(); len(apps) <= 20 {
		attrs = append(attrs, "apps", refsOf(apps))
	} else {
		attrs = append(attrs, "apps", len(apps))
	}
	attrs = p.bus.startLine(attrs)
	p.log.Info("herald listening", attrs...)
}

// ipRate describes connection_rate_per_ip for the start line.
func (p *apiPort) ipRate() string {
	if p.cfg.ConnectionRatePerIP == 0 {
		return "off"
	}
	return fmt.Sprintf("%d/s, burst %d", p.cfg.ConnectionRatePerIP, cmp.Or(p.cfg.ConnectionBurstPerIP, p.cfg.ConnectionRatePerIP))
}
