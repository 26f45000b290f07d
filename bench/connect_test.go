package bench

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestConnectBurstOutlivesEarlyRefusals: every client dials at once and the server refuses the
// first 150 upgrades at once, before any other client has finished subscribing. The refusals
// stop no attempt already in flight: the other 150 subscribe, and the phase counts both.
func TestConnectBurstOutlivesEarlyRefusals(t *testing.T) {
	var upgrades atomic.Int64
	target := startHerald(t, func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/app/") && upgrades.Add(1) <= 150 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			api.ServeHTTP(w, r)
		})
	})
	target.Concurrency = 300
	rep, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 300, Channels: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Setup; s.Established != 150 || s.Failed != 150 || !strings.Contains(s.FirstError, "503") {
		t.Fatalf("setup %+v; want 150 subscribed and the 150 refused counted", s)
	}
}
