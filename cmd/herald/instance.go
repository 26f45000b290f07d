package main

import (
	"cmp"
	"log/slog"
	"net/http"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/metrics"
)

// instance is one running node: its components in a lifecycle, and the two that serve
// watches (the server for its connections, the API port for its listener).
type instance struct {
	*lifecycle
	srv *sessionServer
	api *apiPort
}

// configure builds every component of a node from cfg (validated): each is allocated and
// given the components it uses; nothing listens, connects or runs yet. leave is the drain
// that /health and /ready report.
func configure(cfg config.Config, leave *leaving, log *slog.Logger) *instance {
	if cfg.Cluster.URL != "" && cfg.Cluster.NodeID == "" {
		cfg.Cluster.NodeID = newNodeID()
	}
	store := newAppStore(cfg, log)
	apps := store.apps()
	version := buildVersion()
	reg := newRegistry(cfg.Metrics.Prefix, cfg, version)
	store.export(reg, cfg.Metrics.Prefix)
	fd := capacityOf(cfg.MaxConnections, cfg.MaxHTTPConnections, sideConns(cfg))

	mem := newMemoryGuard(cfg.Memory, log)
	bus := newClusterBus(cfg, reg, log)
	hooks := newWebhookSender(cfg, store, reg, log)
	srv := newSessionServer(cfg, fd.capacity, store, mem, bus, hooks, reg, log)
	ingest := newIngestSources(cfg, cmp.Or(cfg.Cluster.NodeID, newNodeID()), srv, apps, reg, log)
	certs := newTLSCerts(cfg, log)
	api := newAPIPort(cfg, fd, store, srv, bus, ingest, certs, leave, reg, version, log)
	con := newConsolePages(cfg, srv, api, bus, store, log)
	var pages http.Handler // the console's, on the metrics listener
	if con.on() {
		pages = con
	}
	side := newSideListeners(cfg, reg, pages, http.HandlerFunc(api.detailedHealth), log)
	// In start order; they stop in reverse order.
	return &instance{srv: srv, api: api, lifecycle: newLifecycle(cfg.ShutdownTimeout.Duration,
		mem,
		store,  // starts before all that look apps up
		certs,  // before the port that serves with them
		side,   // stops after the console, and last but one: a scrape watches the shutdown
		bus,    // stops after the server: its last unsubscribes and goodbye go through the bus
		hooks,  // stops after the server: it sends the webhooks of the server's last leaves
		srv,    // stops by closing the connections with 4200
		ingest, // stops before the server: each source commits what it handed on, then leaves its group
		// stops alongside those before it: srv.Shutdown waits for requests in progress (and
		// up to 5 s for a connection that sent none), which must not use up the deadline
		// before the WebSocket clients get their 4200
		alongside{api},
		con, // stops first: its pages would only watch the connections go
	)}
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
