package main

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestHealthDetailOnMetrics: a clustered node with an ingest source that cannot reach its
// broker. The public port's /health gives the status and the counts, nothing else: not
// the version, the bus's engine, the node ids or their releases, the source or its error
// (which names an internal host). The metrics listener's /health gives all of it.
func TestHealthDetailOnMetrics(t *testing.T) {
	bus := servicetest.NATS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := writeFile(t, "h.yaml", fmt.Sprintf(`
ingest:
  - name: bids
    app: app-id
    redis: {url: "redis://%s/0", subscribe: ["bids"]}
    format: pusher
`, closed))
	n := startNode(t, "detail-node", bus.URL(), "--config", cfg)

	type detail struct {
		Status      string
		Version     string
		Connections *struct{ Current, Max int }
		Cluster     *struct {
			Engine    string
			NodeID    string `json:"node_id"`
			Connected bool
			Nodes     []struct {
				NodeID  string `json:"node_id"`
				Release string
			}
		}
		Ingest []struct {
			Name, State string
			Error       *string
		}
	}
	poll.NoError(t, clusterWait, "the metrics listener's /health: the bus, its node, the source down and why", func() error {
		status, body, err := n.detail(t)
		if err != nil {
			return err
		}
		var h detail
		if err := json.Unmarshal(body, &h); err != nil || status != 200 {
			return fmt.Errorf("%d %s: %v", status, body, err)
		}
		switch {
		case h.Status != "ok" || h.Version == "" || h.Connections == nil || h.Connections.Max == 0:
			return fmt.Errorf("status, version or connections missing: %s", body)
		case h.Cluster == nil || h.Cluster.Engine != "nats" || h.Cluster.NodeID != "detail-node" || !h.Cluster.Connected ||
			len(h.Cluster.Nodes) == 0 || h.Cluster.Nodes[0].NodeID != "detail-node" || h.Cluster.Nodes[0].Release == "":
			return fmt.Errorf("no bus, node id or release: %s", body)
		case len(h.Ingest) != 1 || h.Ingest[0].Name != "bids" || h.Ingest[0].State != "down" || h.Ingest[0].Error == nil ||
			!strings.Contains(*h.Ingest[0].Error, closed):
			return fmt.Errorf("no source down with an error naming %s: %s", closed, body)
		}
		return nil
	})

	status, body, err := n.get(t, "/health")
	if err != nil || status != 200 {
		t.Fatalf("public /health: %d %s %v", status, body, err)
	}
	wantPublicHealth(t, body, "ok")
	for _, leak := range []string{"detail-node", "nats", "bids", closed, `"version"`, `"release"`} {
		if strings.Contains(string(body), leak) {
			t.Errorf("the public /health shows %q: %s", leak, body)
		}
	}
}

// wantPublicHealth checks a public /health body: exactly the status (want), the connections
// against the capacity and the channels.
func wantPublicHealth(t *testing.T, body []byte, want string) {
	t.Helper()
	var h map[string]json.RawMessage
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("public /health %s: %v", body, err)
	}
	var keys []string
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"channels", "connections", "status"}) {
		t.Fatalf("public /health has %v: %s; want the status, the connections and the channels only", keys, body)
	}
	var c struct {
		Status      string
		Connections struct{ Current, Max *int }
		Channels    *int
	}
	if err := json.Unmarshal(body, &c); err != nil || c.Status != want || c.Connections.Current == nil || c.Connections.Max == nil ||
		*c.Connections.Max <= 0 || c.Channels == nil {
		t.Fatalf("public /health %s; want status %q, the connections (current, max) and the channels", body, want)
	}
}
