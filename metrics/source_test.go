package metrics_test

import (
	"bufio"
	"flag"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/metrics"
)

var update = flag.Bool("update", false, "rewrite testdata/source.golden from the current output")

// fakeSource is a node as the collector reads it: every counter a value of its own, so a
// metric that read another's field would show.
type fakeSource struct{}

var _ metrics.Source = fakeSource{}

func (fakeSource) AppCounters() []metrics.AppCounters {
	return []metrics.AppCounters{
		{AppID: "a1", Connections: 1, NewConnections: 2, Disconnections: 3, MessagesSent: 4, BytesSent: 5,
			MessagesReceived: 6, BytesReceived: 7, SlowConsumers: 8, ClientEventsLimited: 9, Channels: 10,
			Subscriptions: 11, CacheBytes: 12, CacheEntries: 13, CacheEvictions: 14, SubscribesLimited: 15,
			ReplayedBytes: 16, ReplayPages: 17, Writes: 18},
		{AppID: "a2", Connections: 101, NewConnections: 102, Disconnections: 103, MessagesSent: 104, BytesSent: 105,
			MessagesReceived: 106, BytesReceived: 107, SlowConsumers: 108, ClientEventsLimited: 109, Channels: 110,
			Subscriptions: 111, CacheBytes: 112, CacheEntries: 113, CacheEvictions: 114, SubscribesLimited: 115,
			ReplayedBytes: 116, ReplayPages: 117, Writes: 118},
	}
}

func (fakeSource) NodeStats() metrics.NodeStats {
	return metrics.NodeStats{Connections: 41, MaxConnections: 42, Channels: 43, PongTimeouts: 45, PongsUnread: 46, Refusing: true,
		Refused: []metrics.Refusal{{"app_not_found", 21}, {"draining", 22}, {"origin", 23}, {"ip_rate", 24},
			{"memory", 25}, {"node_full", 26}, {"app_full", 27}},
		QueueDepths: []int{31, 0, 33}, WriteDelays: []time.Duration{0, 1500 * time.Microsecond, 0}, HistoryLoads: 47, Rollbacks: 48, EpochsLost: 49, Keys: metrics.KeyStats{Held: 5, Repeats: 6, Waits: 7, Evicted: 8, Conflicts: 9, Received: 10},
		ReplayRefused: []metrics.Refusal{{"connection", 51}, {"address", 52}, {"app", 53}, {"node", 54}}}
}

// TestSourceExposition: the text /metrics serves for a source, byte for byte (the names,
// help, types, labels and values that dashboards read): testdata/source.golden. The publish
// and ingest latencies observed through the registry's observers are in it too.
func TestSourceExposition(t *testing.T) {
	reg := metrics.New("herald_", []string{"a1", "a2"})
	reg.Attach("herald_", fakeSource{})
	reg.HTTP.Call("a1", 100, 20)
	reg.HTTP.Call("unknown", 1, 1) // not an app: not counted
	reg.PublishLatency("a1").Observe(0.003)
	reg.IngestLatency("herald_")("a2").Observe(2.5)
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var b strings.Builder
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "herald_") || strings.HasPrefix(l, "# HELP herald_") || strings.HasPrefix(l, "# TYPE herald_") {
			b.WriteString(l + "\n")
		}
	}
	got := b.String()
	const golden = "testdata/source.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("/metrics differs from %s (go test -run TestSourceExposition -update rewrites it):\n%s", golden, diff(string(want), got))
	}
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if _, ok := value(t, fams, name, "", ""); !ok {
			t.Errorf("%s missing", name)
		}
	}
}

// TestPrefixIsConfigurable: the source's metrics take the prefix Attach is given.
func TestPrefixIsConfigurable(t *testing.T) {
	reg := metrics.New("soketi_", []string{"a1"})
	reg.Attach("soketi_", fakeSource{})
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := value(t, fams, "soketi_connected", "app_id", "a1"); !ok {
		t.Fatal("soketi_connected missing with prefix soketi_")
	}
	if _, ok := value(t, fams, "herald_connected", "app_id", "a1"); ok {
		t.Fatal("herald_connected present with prefix soketi_")
	}
}

// diff lists the lines only in want (-) and only in got (+).
func diff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
