package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/postgres"
)

var scale = flag.Int("scale", 0, "TestScale: measure a Store over this many apps (docs/benchmarks.md)")

// TestScale measures a Store over Soketi's table with N apps: the first read (Start), a full
// reload, and the live heap the snapshot holds per app. It runs only with -scale N.
func TestScale(t *testing.T) {
	if *scale == 0 {
		t.Skip("a measurement: -scale 10000")
	}
	srv, db := harness(t)
	db.Exec(t, fmt.Sprintf(soketiDDL, "apps"))
	db.Exec(t, `INSERT INTO apps (id, "key", secret, max_connections, enable_client_messages, "enabled", max_backend_events_per_sec,
		max_client_events_per_sec, max_read_req_per_sec, webhooks, enable_user_authentication)
		SELECT 'app-' || i, md5('key' || i), md5('secret' || i), -1, 1, 1, -1, -1, -1, '[]', 0 FROM generate_series(1, $1::int) AS i`, *scale)
	src, err := postgres.Open(context.Background(), postgres.Config{URL: srv.PostgresURL()})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := appstore.New(appstore.Config{Refresh: time.Hour})
	began := time.Now()
	if err := s.Start(src); err != nil {
		t.Fatal(err)
	}
	start := time.Since(began)
	runtime.GC()
	runtime.ReadMemStats(&after)
	began = time.Now()
	const reloads = 10
	for range reloads {
		if err := s.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d apps: first read %v, a full reload %v, live heap of the store %.0f B per app", len(s.Apps()),
		start.Round(time.Millisecond), (time.Since(began) / reloads).Round(100*time.Microsecond),
		float64(after.HeapAlloc-before.HeapAlloc)/float64(*scale))
	s.Close()
}
