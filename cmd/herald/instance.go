package main

import (
	"cmp"
	"log/slog"
	"net/http"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
)

// instance is one running node: its components in a lifecycle, and the two that serve
// watches (the server for its connections, the API port for its listener).
type instance struct {
	*lifecycle
	srv *sessionServer
	api *apiPort
}

// startInstance builds and starts the components of a node from cfg (validated), in order,
// and returns the running node. It only builds and starts: each component is built from
// what it uses, handed to its constructor, what the components started before it gave
// included (the started server, the bus link), so that it cannot be built before they
// started. When one fails to start, those started before it are stopped (within
// shutdown_timeout) and startInstance returns its error, which the component logged. leave
// is the drain that /health and /ready report.
func startInstance(cfg config.Config, leave *leaving, log *slog.Logger) (*instance, error) {
	if cfg.Cluster.URL != "" && cfg.Cluster.NodeID == "" {
		cfg.Cluster.NodeID = newNodeID()
	}
	store := newAppStore(cfg, log)
	apps := store.apps()
	version := buildVersion()
	reg := newRegistry(cfg.Metrics.Prefix, cfg, version)
	store.export(reg, cfg.Metrics.Prefix)
	fd := capacityOf(cfg.MaxConnections, cfg.MaxHTTPConnections, sideConns(cfg))
	// The metrics listener starts before the console and the API port it serves the pages
	// and the detailed /health of: they set these once started.
	detailed := newLateHandler(healthStarting)
	var pages *lateHandler
	var consoleHandler http.Handler // nil: no console
	if cfg.Console.Token != "" {
		pages = newLateHandler(consoleStarting)
		consoleHandler = pages
	}
	// They start in this order and stop in reverse order.
	l := newLifecycle(cfg.ShutdownTimeout.Duration)
	mem, err := startGiving(l, newMemoryGuard(cfg.Memory, log))
	if err != nil {
		return nil, err
	}
	// before all that look apps up
	if err := l.start(store); err != nil {
		return nil, err
	}
	// before the port that serves with them
	tlsConf, err := startGiving(l, newTLSCerts(cfg, log))
	if err != nil {
		return nil, err
	}
	// stops after the console, and last but one: a scrape watches the shutdown
	if err := l.start(newSideListeners(cfg, reg, consoleHandler, detailed, log)); err != nil {
		return nil, err
	}
	// stops after the server: its last unsubscribes and goodbye go through the bus
	bus, err := startGiving(l, newClusterBus(cfg, reg, log))
	if err != nil {
		return nil, err
	}
	// stops after the server: it sends the webhooks of the server's last leaves
	hooks, err := startGiving(l, newWebhookSender(cfg, apps, store.follow, reg, log))
	if err != nil {
		return nil, err
	}
	// stops by closing the connections with 4200
	srv := newSessionServer(cfg, fd.capacity, apps, mem, bus.newState(clusterState(cfg), log), reg, log, hooks, store)
	node, err := startGiving(l, srv)
	if err != nil {
		return nil, err
	}
	// stops before the server: each source commits what it handed on, then leaves its group
	ingest := newIngestSources(cfg, cmp.Or(cfg.Cluster.NodeID, newNodeID()), bus.publisher(node), apps, reg, log)
	if err := l.start(ingest); err != nil {
		return nil, err
	}
	// stops alongside those before it: srv.Shutdown waits for requests in progress (and up
	// to 5 s for a connection that sent none), which must not use up the deadline before
	// the WebSocket clients get their 4200
	health := healthParts{node: node, bus: bus, ingest: ingest.health, appStore: store.health, leave: leave, version: version}
	rest := httpapi.New(restConfig(cfg), apps, node, health.report, reg.HTTP, log)
	api := newAPIPort(cfg, fd, rest, node, apps, bus, tlsConf, detailed, reg, version, log)
	if err := l.start(alongside{api}); err != nil {
		return nil, err
	}
	// stops first: its pages would only watch the connections go
	if err := l.start(newConsolePages(cfg, node, rest.TrustedEvents, bus, apps, appAdmin{store}, pages, log)); err != nil {
		return nil, err
	}
	return &instance{lifecycle: l, srv: srv, api: api}, nil
}

// newRegistry is the node's metrics registry, with the build's version. The apps of the
// configuration are listed from the start; those of an app store from their first call.
func newRegistry(prefix string, cfg config.Config, version string) *metrics.Registry {
	var ids []string
	for _, a := range cfg.Apps {
		ids = append(ids, a.ID)
	}
	reg := metrics.New(prefix, ids)
	reg.BuildInfo(prefix, version)
	return reg
}
