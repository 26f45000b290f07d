package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/metrics"
)

// TestCacheMetrics: three 10 KB events to cache channels where the app's bound holds two.
func TestCacheMetrics(t *testing.T) {
	const bound = 24 << 10
	app := &herald.App{ID: "a1", Key: "k1", Secret: "s1", Limits: herald.DefaultLimits}
	reg := metrics.New("herald_", []string{"a1"})
	h, err := hub.New(hub.Config{MaxConnections: 10, CacheMaxBytes: 4 * bound, CacheMaxBytesPerApp: bound}, []*herald.App{app}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	reg.Attach("herald_", h)
	for i := 0; i < 3; i++ {
		if err := h.Publish("a1", herald.Event{Name: "e", Channel: fmt.Sprint("cache-", i), Data: strings.Repeat("x", 10_000)}); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := value(t, fams, "herald_cache_entries", "app_id", "a1"); v != 2 {
		t.Errorf("herald_cache_entries = %v (present %v), want 2", v, ok)
	}
	if v, ok := value(t, fams, "herald_cache_evictions_total", "app_id", "a1"); v != 1 {
		t.Errorf("herald_cache_evictions_total = %v (present %v), want 1", v, ok)
	}
	if v, ok := value(t, fams, "herald_cache_bytes", "app_id", "a1"); v < 20_000 || v > bound {
		t.Errorf("herald_cache_bytes = %v (present %v), want two 10 KB events' worth, at most %d", v, ok, bound)
	}
}
