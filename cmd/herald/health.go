package main

import (
	"net/http"

	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/session"
)

// healthParts are what /health (both ports') and /ready report, from what the components give:
// the started server and bus link, and the other components' parts of the report.
type healthParts struct {
	node     *session.Server
	bus      link
	ingest   func() []httpapi.IngestHealth  // the ingest sources'
	appStore func() *httpapi.AppStoreHealth // the app store's
	leave    *leaving
	version  string
}

// report is the node's health (httpapi.Health).
func (n healthParts) report() httpapi.HealthReport {
	st := n.node.Stats()
	r := httpapi.HealthReport{Status: "ok", Connections: httpapi.Capacity{Current: st.Connections, Max: st.MaxConnections},
		Channels: st.Channels, Version: n.version, Cluster: n.bus.health(), Ingest: n.ingest(), AppStore: n.appStore()}
	switch {
	case st.Draining || n.leave.draining():
		r.Status = "draining"
	case st.Refusing:
		r.Status = "refusing"
	case r.Cluster != nil && !r.Cluster.Connected:
		r.Status = "bus_down"
	}
	return r
}

// healthStarting answers the metrics listener's /health until the API port has started: 503.
// From then on it answers with the whole report (the bus and its nodes, the app store, the
// ingest sources and their errors, the version), of which the public /health gives the
// status and the counts only (apiPort.start sets it).
func healthStarting(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"status":"starting"}` + "\n"))
}
