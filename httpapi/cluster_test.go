package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/pusher"
)

// busDownServer is a session server whose cluster bus is unreachable: it refuses every
// publish as the real one does then. Nothing else of it is used.
type busDownServer struct {
	mu        sync.Mutex
	published int
}

func (h *busDownServer) ServeWS(w http.ResponseWriter, r *http.Request, key string) {
	http.Error(w, "not here", http.StatusNotFound)
}

func (h *busDownServer) Publish(appID string, evs ...herald.Event) error {
	h.mu.Lock()
	h.published++
	h.mu.Unlock()
	return fmt.Errorf("publish: %w", herald.Errorf(herald.CodeUnavailable, "cluster bus unavailable"))
}

func (h *busDownServer) Channels(appID, prefix string) []herald.ChannelStat { return nil }
func (h *busDownServer) Channel(string, string) (herald.ChannelStat, bool) {
	return herald.ChannelStat{}, false
}
func (h *busDownServer) Users(appID, name string) []string      { return nil }
func (h *busDownServer) TerminateUser(appID, userID string) int { return 0 }
func (h *busDownServer) History(context.Context, string, string, uint64, int) (herald.HistoryPage, error) {
	return herald.HistoryPage{}, herald.Errorf(herald.CodeUnavailable, "cluster bus unavailable")
}

// TestPublishBusUnavailable: a publish the node refuses because the cluster bus is down
// answers 503 with a JSON error and Retry-After, for one event and for a batch, so that a
// Pusher server library retries it.
func TestPublishBusUnavailable(t *testing.T) {
	app := herald.App{ID: "1", Key: "key-one", Secret: "secret-one"}
	apps := herald.NewStaticApps([]herald.App{app})
	a, _ := apps.AppByID("1")
	node := &busDownServer{}
	health := func() httpapi.HealthReport { return httpapi.HealthReport{Status: "ok"} }
	srv := httptest.NewServer(httpapi.New(httpapi.Config{}, apps, node, health, nil, nil))
	t.Cleanup(srv.Close)

	for _, c := range []struct{ path, body string }{
		{"/apps/1/events", `{"name":"e","channel":"room","data":"x"}`},
		{"/apps/1/batch_events", `{"batch":[{"name":"e","channel":"room","data":"x"},{"name":"f","channel":"hall","data":"y"}]}`},
	} {
		q := pusher.SignRequest(a, "POST", c.path, nil, []byte(c.body), time.Now())
		resp, err := http.Post(srv.URL+c.path+"?"+q.Encode(), "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.path, ct)
		}
		msg := wantError(t, resp.StatusCode, b, http.StatusServiceUnavailable)
		if !strings.Contains(msg, "cluster bus unavailable") {
			t.Errorf("%s: error %q does not say the bus is unavailable", c.path, msg)
		}
		if ra := resp.Header.Get("Retry-After"); ra != "1" {
			t.Errorf("%s: Retry-After %q, want \"1\"", c.path, ra)
		}
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.published != 2 {
		t.Errorf("the node was asked to publish %d times, want 2 (each call reaches it once)", node.published)
	}
}

// TestHealthCluster: a clustered node's detailed /health (DetailedHealth, the metrics
// listener's) carries its bus's state, its public /health only the status; /ready answers
// 503 "bus_down" while the bus is unreachable, even when the node is also full.
func TestHealthCluster(t *testing.T) {
	var mu sync.Mutex
	report := httpapi.HealthReport{}
	set := func(r httpapi.HealthReport) { mu.Lock(); report = r; mu.Unlock() }
	health := func() httpapi.HealthReport { mu.Lock(); defer mu.Unlock(); return report }
	apps := herald.NewStaticApps([]herald.App{{ID: "1", Key: "key-one", Secret: "secret-one"}})
	api := httpapi.New(httpapi.Config{}, apps, &busDownServer{}, health, nil, nil)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	detailed := httptest.NewServer(http.HandlerFunc(api.DetailedHealth))
	t.Cleanup(detailed.Close)
	get := func(base, path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	want := func(path string, status int, body string) {
		t.Helper()
		base := srv.URL
		if path == "detail" {
			base, path = detailed.URL, "/health"
		}
		s, b := get(base, path)
		if s != status {
			t.Fatalf("%s: status %d, body %s; want %d", path, s, b, status)
		}
		wantJSON(t, b, body)
	}

	up := &httpapi.ClusterHealth{Engine: "nats", NodeID: "n1", Connected: true, Interests: 3}
	set(httpapi.HealthReport{Status: "ok", Connections: httpapi.Capacity{Current: 1, Max: 10}, Version: "v", Cluster: up})
	want("detail", 200, `{"status":"ok","connections":{"current":1,"max":10},"channels":0,"version":"v",
		"cluster":{"engine":"nats","node_id":"n1","connected":true,"interests":3}}`)
	want("/health", 200, `{"status":"ok","connections":{"current":1,"max":10},"channels":0}`)
	want("/ready", 200, `{"ready":true}`)

	// Mid-upgrade: a node of v0.1.0 (no release, state version 1, no features) is heard.
	mixed := &httpapi.ClusterHealth{Engine: "nats", NodeID: "n1", Connected: true, Interests: 3,
		Nodes: []httpapi.ClusterNode{{NodeID: "n1", Self: true, Release: "v0.2.0", StateVersion: 2, Features: []string{"bundles"}},
			{NodeID: "n2", StateVersion: 1, Features: []string{}}}}
	set(httpapi.HealthReport{Status: "ok", Connections: httpapi.Capacity{Current: 1, Max: 10}, Version: "v", Cluster: mixed})
	want("detail", 200, `{"status":"ok","connections":{"current":1,"max":10},"channels":0,"version":"v",
		"cluster":{"engine":"nats","node_id":"n1","connected":true,"interests":3,"nodes":[
			{"node_id":"n1","self":true,"release":"v0.2.0","state_version":2,"features":["bundles"]},
			{"node_id":"n2","release":"","state_version":1,"features":[]}]}}`)

	down := &httpapi.ClusterHealth{Engine: "redis", NodeID: "n1", Connected: false, Interests: 3}
	set(httpapi.HealthReport{Status: "bus_down", Connections: httpapi.Capacity{Current: 10, Max: 10}, Version: "v", Cluster: down})
	want("detail", 200, `{"status":"bus_down","connections":{"current":10,"max":10},"channels":0,"version":"v",
		"cluster":{"engine":"redis","node_id":"n1","connected":false,"interests":3}}`)
	want("/health", 200, `{"status":"bus_down","connections":{"current":10,"max":10},"channels":0}`)
	want("/ready", 503, `{"ready":false,"status":"bus_down"}`)
}
