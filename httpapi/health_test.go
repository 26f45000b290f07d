package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/httpapi"
)

// TestHealthHidesIngestErrors: the public /health says a source is down, not why (its error
// names internal brokers and hosts); DetailedHealth, served on the metrics listener, says why.
func TestHealthHidesIngestErrors(t *testing.T) {
	const why = "dial tcp 10.1.2.3:9092: connect: connection refused"
	health := func() httpapi.HealthReport {
		return httpapi.HealthReport{Status: "ok", Version: "v", Ingest: []httpapi.IngestHealth{
			{Name: "trades", Kind: "kafka", State: "down", Error: why, Consumed: 7}}}
	}
	apps := herald.NewStaticApps([]herald.App{{ID: "1", Key: "key-one", Secret: "secret-one"}})
	api := httpapi.New(httpapi.Config{}, apps, &busDownHub{}, health, nil, nil)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantJSON(t, b, `{"status":"ok","connections":{"current":0,"max":0},"channels":0,"version":"v",
		"ingest":[{"name":"trades","kind":"kafka","state":"down","consumed":7,"lag":0}]}`)

	rec := httptest.NewRecorder()
	api.DetailedHealth(rec, httptest.NewRequest("GET", "/health", nil))
	if !strings.Contains(rec.Body.String(), `"error":"`+why+`"`) {
		t.Fatalf("detailed health %s; want the source's error", rec.Body.String())
	}
}
