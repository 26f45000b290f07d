package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/httpapi"
)

// TestHealthPublicAndDetailed: the public /health gives the status and the counts, and
// nothing of the node's internals (the version, the bus, its nodes and releases, the app
// store, its kind, app count and last error, which names the database's host and user, the
// ingest sources and theirs); DetailedHealth, served on the metrics listener, gives all of it.
func TestHealthPublicAndDetailed(t *testing.T) {
	const why = "dial tcp 10.1.2.3:9092: connect: connection refused"
	const dbErr = `failed to connect to user=herald database=apps: 10.9.9.9:5432: connection refused`
	health := func() httpapi.HealthReport {
		return httpapi.HealthReport{Status: "ok", Connections: httpapi.Capacity{Current: 2, Max: 10}, Channels: 4, Version: "v9.9.9",
			Ingest:   []httpapi.IngestHealth{{Name: "trades", Kind: "kafka", State: "down", Error: why, Consumed: 7}},
			Cluster:  &httpapi.ClusterHealth{Engine: "nats", NodeID: "node-7", Connected: true, Nodes: []httpapi.ClusterNode{{NodeID: "node-7", Self: true, Release: "v9.9.9"}}},
			AppStore: &httpapi.AppStoreHealth{Kind: "postgres", Apps: 12, LastError: dbErr}}
	}
	apps := herald.NewStaticApps([]herald.App{{ID: "1", Key: "key-one", Secret: "secret-one"}})
	api := httpapi.New(httpapi.Config{}, apps, &busDownServer{}, health, nil, nil)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantJSON(t, b, `{"status":"ok","connections":{"current":2,"max":10},"channels":4}`)
	for _, secret := range []string{"v9.9.9", "node-7", "nats", "postgres", "10.9.9.9", "user=herald", "trades", "10.1.2.3"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the public /health shows %q: %s", secret, b)
		}
	}

	rec := httptest.NewRecorder()
	api.DetailedHealth(rec, httptest.NewRequest("GET", "/health", nil))
	var detail httpapi.HealthReport
	if err := json.Unmarshal(rec.Body.Bytes(), &detail); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(detail, health()) {
		t.Fatalf("detailed health %s; want the whole report %+v", rec.Body.String(), health())
	}
	if !strings.Contains(rec.Body.String(), `"error":"`+why+`"`) || !strings.Contains(rec.Body.String(), `"last_error":"`+dbErr+`"`) {
		t.Fatalf("detailed health %s; want the source's and the app store's errors", rec.Body.String())
	}
}
