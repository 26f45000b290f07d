package console

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/ssetest"
)

// patience is how long a test waits for what normally takes milliseconds: the machine is
// shared and busy, so it is generous, and a passing test never waits it out.
const patience = 20 * time.Second

const testToken = "test-token-0123456789"

// fakeSource is a node whose figures a test sets.
type fakeSource struct {
	mu       sync.Mutex
	sample   Sample
	top      []ChannelCount
	channels int
}

func (f *fakeSource) Sample() Sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sample
	s.Apps = append([]AppSample(nil), s.Apps...)
	s.Refused = maps.Clone(s.Refused) // as the server's: a map of its own each time
	return s
}

func (f *fakeSource) TopChannels(appID string, n int) ([]ChannelCount, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.top[:min(n, len(f.top))], f.channels
}

func (f *fakeSource) set(fn func(s *Sample)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.sample)
}

// published records the event creator's calls.
type published struct {
	mu    sync.Mutex
	calls []string // app ids
}

func (p *published) publish(w http.ResponseWriter, r *http.Request, appID string) {
	p.mu.Lock()
	p.calls = append(p.calls, appID)
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, struct{}{})
}

func (p *published) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// newTestConsole runs a console for apps a1 and a2 on a loopback server.
func newTestConsole(t *testing.T, mod func(*Config)) (*Console, *httptest.Server, *fakeSource, *published) {
	t.Helper()
	src := &fakeSource{sample: Sample{Apps: []AppSample{{ID: "a1"}, {ID: "a2"}}, Refused: map[string]int64{}}}
	pub := &published{}
	cfg := Config{Token: testToken, Node: "n1", Apps: []string{"a1", "a2"}, Source: src, Publish: pub.publish, Interval: 100 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c := New(cfg, nil)
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c, srv, src, pub
}

// openStream opens /console/stream?app=app with the bearer token and fails the test
// unless it is a 200 event stream.
func openStream(t *testing.T, base, app string) *ssetest.Stream {
	t.Helper()
	return ssetest.Open(t, base+"/console/stream?app="+app, testToken)
}

// next returns the next event named name whose decoded data satisfies ok, failing the
// test after patience; other events are skipped.
func next[T any](t *testing.T, s *ssetest.Stream, name string, what string, ok func(T) bool) T {
	t.Helper()
	deadline := time.After(patience)
	var last string
	for {
		select {
		case ev, open := <-s.Events:
			if !open {
				t.Fatalf("stream ended waiting for %s (last %s: %s)", what, name, last)
			}
			if ev.Name != name {
				continue
			}
			last = ev.Data
			var v T
			if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
				t.Fatalf("%s event: %v: %s", name, err, ev.Data)
			}
			if ok(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("waited %v for %s; last %s event: %s", patience, what, name, last)
		}
	}
}

// eventually polls cond until it holds, failing after patience (internal/poll).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, patience, what, func() (bool, string) { return cond(), "" })
}
