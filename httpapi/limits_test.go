package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

type meter struct {
	mu    sync.Mutex
	calls map[string]int
	in    map[string]int64
	out   map[string]int64
}

func (m *meter) Call(appID string, received, transmitted int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[appID]++
	m.in[appID] += received
	m.out[appID] += transmitted
}

func TestRESTRatePerApp(t *testing.T) {
	apps := herald.NewStaticApps([]herald.App{
		{ID: "slow", Key: "k1", Secret: "s1", Limits: herald.Limits{MaxAPIRequestsPerSecond: 3}},
		{ID: "free", Key: "k2", Secret: "s2"},
	})
	h, err := session.New(session.Config{Workers: 1, MaxConnections: 10}, apps, cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	m := &meter{calls: map[string]int{}, in: map[string]int64{}, out: map[string]int64{}}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{}, apps, h, func() httpapi.HealthReport { return httpapi.HealthReport{Status: "ok"} }, m, nil))
	t.Cleanup(srv.Close)

	post := func(id string) *http.Response {
		t.Helper()
		app, _ := apps.AppByID(id)
		body := `{"name":"e","channel":"c","data":"{}"}`
		path := "/apps/" + id + "/events"
		q := pusher.SignRequest(app, "POST", path, nil, []byte(body), time.Now())
		resp, err := http.Post(srv.URL+path+"?"+q.Encode(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// The burst of 3 passes, and a request soon after is refused with Retry-After. How soon
	// depends on the machine: the bucket refills at 3/s while the requests go on, so the test
	// posts until the first refusal and bounds the accepted ones by the time that took.
	var refused *http.Response
	ok := 0
	start := time.Now()
	for refused == nil && time.Since(start) < wait {
		if r := post("slow"); r.StatusCode == http.StatusOK {
			ok++
		} else {
			refused = r
		}
	}
	took := time.Since(start)
	if refused == nil || refused.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("posted for %v to an app limited to 3/s: %d accepted and no 429", took, ok)
	}
	if most := 3 + int(took.Seconds()*3) + 1; ok < 3 || ok > most {
		t.Fatalf("%d accepted before the first 429 in %v, want 3..%d", ok, took, most)
	}
	if ra, err := strconv.Atoi(refused.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q, want a positive number of seconds", refused.Header.Get("Retry-After"))
	}
	// Another app is not affected.
	for i := 0; i < 10; i++ {
		if r := post("free"); r.StatusCode != http.StatusOK {
			t.Fatalf("unlimited app got %d", r.StatusCode)
		}
	}
	// An unsigned request does not spend the limited app's rate: it is refused as unsigned.
	resp, err := http.Post(srv.URL+"/apps/slow/events", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned request: %d, want 401", resp.StatusCode)
	}
	// The rate refills: within a second a request passes again (given longer: a busy machine
	// may be slower, never faster).
	poll.Until(t, wait, "a request to be accepted again after the limit was hit", func() (bool, string) {
		st := post("slow").StatusCode
		return st == http.StatusOK, fmt.Sprintf("status %d", st)
	})

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls["free"] != 10 || m.in["free"] != 10*int64(len(`{"name":"e","channel":"c","data":"{}"}`)) || m.out["free"] < 10*int64(len("{}")) {
		t.Fatalf("meter for free: %d calls, %d bytes in, %d out", m.calls["free"], m.in["free"], m.out["free"])
	}
	if m.calls["slow"] < ok+2 {
		t.Fatalf("meter for slow: %d calls, want every call counted (at least %d)", m.calls["slow"], ok+2)
	}
}
