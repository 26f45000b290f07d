package httpapi_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// logLines is a slog JSON handler's output, parsed one record a line.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns the records whose msg is msg.
func (l *logLines) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// TestRefusedRequestsLogged: a signed request of a known app refused with 401 or 413 is
// logged with the app and the reason, a burst of them is one line per status and interval,
// and a 400 is not logged.
func TestRefusedRequestsLogged(t *testing.T) {
	apps := herald.NewStaticApps([]herald.App{{ID: "1", Key: "key-one", Secret: "secret-one",
		Limits: herald.Limits{MaxEventPayloadBytes: 1000}}})
	h, err := session.New(session.Config{Workers: 1, MaxConnections: 10}, apps, cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	var logs logLines
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	srv := httptest.NewServer(httpapi.New(httpapi.Config{}, apps, h,
		func() httpapi.HealthReport { return httpapi.HealthReport{Status: "ok"} }, nil, log))
	t.Cleanup(srv.Close)
	app, _ := apps.AppByID("1")
	const msg = "refusing REST requests"

	post := func(body string, forge bool) int {
		t.Helper()
		q := pusher.SignRequest(app, "POST", "/apps/1/events", nil, []byte(body), time.Now())
		if forge {
			q.Set("auth_signature", strings.Repeat("0", 64))
		}
		resp, err := http.Post(srv.URL+"/apps/1/events?"+q.Encode(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ok := `{"name":"e","channel":"c","data":"{}"}`

	if st := post(ok, true); st != http.StatusUnauthorized {
		t.Fatalf("forged signature: status %d, want 401", st)
	}
	recs := logs.records(t, msg)
	if len(recs) != 1 {
		t.Fatalf("one refused request logged %d lines %q, want 1:\n%s", len(recs), msg, logs.buf.String())
	}
	if r := recs[0]; r["app_id"] != "1" || r["status"] != float64(401) || !strings.Contains(r["reason"].(string), "signature") {
		t.Fatalf("refusal logged as %v; want app_id 1, status 401 and a reason naming the signature", r)
	}

	start := time.Now()
	for range 100 {
		if st := post(ok, true); st != http.StatusUnauthorized {
			t.Fatalf("forged signature: status %d, want 401", st)
		}
	}
	// One line per 10 s interval; the burst normally takes milliseconds, so this is 1.
	took := time.Since(start)
	if n, most := len(logs.records(t, msg)), 1+int(took/(10*time.Second)); n > most {
		t.Fatalf("101 refusals in %v logged %d lines, want at most %d:\n%s", took, n, most, logs.buf.String())
	}

	big := `{"name":"e","channel":"c","data":"` + strings.Repeat("x", 2000) + `"}`
	if st := post(big, false); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("2000-byte data: status %d, want 413", st)
	}
	var sawTooLarge bool
	for _, r := range logs.records(t, msg) {
		if r["status"] == float64(413) && r["app_id"] == "1" {
			sawTooLarge = true
		}
	}
	if !sawTooLarge {
		t.Fatalf("a 413 was not logged beside the 401s (its own interval):\n%s", logs.buf.String())
	}

	before := len(logs.records(t, msg))
	if st := post(`{"name":"e"}`, false); st != http.StatusBadRequest {
		t.Fatalf("event without a channel: status %d, want 400", st)
	}
	if n := len(logs.records(t, msg)); n != before {
		t.Fatalf("a 400 was logged as a refusal:\n%s", logs.buf.String())
	}
}
