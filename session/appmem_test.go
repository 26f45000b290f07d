package session_test

import (
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/session"
)

var appMem = flag.Int("appmem", 0, "TestAppStateMemory: measure the server's state of this many apps (docs/benchmarks.md)")

// TestAppStateMemory measures what the server keeps per app (its state: the engine's group,
// the cluster state's tables, presence and cache, the settings) on a single node: the live
// heap after a collection, before and after New, divided by the apps; and New's time. It runs
// only with -appmem N; the figures are logged.
func TestAppStateMemory(t *testing.T) {
	if *appMem == 0 {
		t.Skip("a measurement: -appmem 10000")
	}
	apps := make([]herald.App, *appMem)
	for i := range apps {
		apps[i] = herald.App{ID: fmt.Sprint("app-", i), Key: fmt.Sprint("key-", i), Secret: "s"}
	}
	store := herald.NewStaticApps(apps)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	began := time.Now()
	h, err := session.New(session.Config{}, store, local(cluster.Config{}), nil)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("%d apps: New took %v; live heap %.0f B per app", *appMem, took.Round(time.Millisecond),
		float64(after.HeapAlloc-before.HeapAlloc)/float64(*appMem))
	_ = h.Shutdown(t.Context())
}
