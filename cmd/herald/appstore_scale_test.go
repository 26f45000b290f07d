package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/servicetest"
)

var scaleApps = flag.Int("appstore.scale", 0, "TestAppStoreScale: measure a node on this many apps in PostgreSQL (docs/benchmarks.md)")

// TestAppStoreScale measures a node whose apps are in PostgreSQL (Soketi's table, no
// updated_at: every poll reads the whole table), against one with a single app: the time
// from the process's start to /health ok, the Go heap in use and the RSS once started, and
// the cost of the polls. It runs only with -appstore.scale N; the figures are logged.
func TestAppStoreScale(t *testing.T) {
	if *scaleApps == 0 {
		t.Skip("a measurement: -appstore.scale 10000")
	}
	pg := servicetest.Postgres(t)
	url := pg.PostgresURL()
	for _, table := range []string{"apps_one", "apps_many"} {
		pgExec(t, url, strings.Replace(soketiPostgres, "apps (", table+" (", 1))
	}
	pgExec(t, url, `INSERT INTO apps_one (id, "key", secret, max_connections, enable_client_messages, "enabled", max_backend_events_per_sec,
		max_client_events_per_sec, max_read_req_per_sec, webhooks, enable_user_authentication)
		VALUES ('app-1', 'key-1', 'secret-1', -1, 1, 1, -1, -1, -1, '[]', 0)`)
	pgExec(t, url, `INSERT INTO apps_many (id, "key", secret, max_connections, enable_client_messages, "enabled", max_backend_events_per_sec,
		max_client_events_per_sec, max_read_req_per_sec, webhooks, enable_user_authentication)
		SELECT 'app-' || i, md5('key' || i), md5('secret' || i), -1, 1, 1, -1, -1, -1, '[]', 0 FROM generate_series(1, $1::int) AS i`, *scaleApps)

	type figures struct {
		start               time.Duration
		heap, rss, cpuTicks float64
	}
	measure := func(table string, n int) figures {
		t.Helper()
		began := time.Now()
		nd := startServe(t, table, "--app-store-postgres-url", url, "--app-store-table", table, "--app-store-refresh", "5s")
		until(t, table+" up", func() bool {
			h := nd.storeHealth(t)
			return h.Status == "ok" && h.AppStore != nil && h.AppStore.Apps == n
		})
		var f figures
		f.start = time.Since(began)
		// Settle: the start's garbage collected, two polls done.
		time.Sleep(11 * time.Second) // a measurement: two polls of 5 s must pass
		heap, _ := scrape(t, nd, "go_memstats_heap_inuse_bytes")
		f.heap = heap
		f.rss = rssOf(t, nd.cmd.Process.Pid)
		cpu0 := cpuOf(t, nd.cmd.Process.Pid)
		time.Sleep(30 * time.Second) // a measurement: six polls
		f.cpuTicks = cpuOf(t, nd.cmd.Process.Pid) - cpu0
		if err := nd.stop(); err != nil {
			t.Error(err)
		}
		return f
	}
	one := measure("apps_one", 1)
	many := measure("apps_many", *scaleApps)
	n := float64(*scaleApps - 1)
	t.Logf("1 app: start to /health ok %v, heap in use %.1f MiB, RSS %.1f MiB, CPU over 30 s of polls %.2f s",
		one.start.Round(time.Millisecond), one.heap/(1<<20), one.rss/(1<<20), one.cpuTicks/100)
	t.Logf("%d apps: start to /health ok %v, heap in use %.1f MiB, RSS %.1f MiB, CPU over 30 s of polls %.2f s",
		*scaleApps, many.start.Round(time.Millisecond), many.heap/(1<<20), many.rss/(1<<20), many.cpuTicks/100)
	t.Logf("per app: heap %.0f B, RSS %.0f B; a poll of the whole table costs %.1f ms of CPU more (6 polls)",
		(many.heap-one.heap)/n, (many.rss-one.rss)/n, (many.cpuTicks-one.cpuTicks)/100/6*1000)
}

// rssOf reads a process's resident set, in bytes.
func rssOf(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuOf reads a process's user and system CPU, in clock ticks (100 a second).
func cpuOf(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return u + s
}
