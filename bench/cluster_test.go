package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/session"
)

// healthConnections reads connections.current from a node's /health.
func healthConnections(ctx context.Context, base string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Connections struct {
			Current *int64 `json:"current"`
		} `json:"connections"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &h); err != nil || h.Connections.Current == nil {
		return 0, fmt.Errorf("%s/health: %q: %v", base, body, err)
	}
	return *h.Connections.Current, nil
}

// twoNodes starts a cluster of two herald nodes on an in-memory bus and returns a target whose
// WS names both, whose REST is node A's, and whose pids are this process twice (both nodes live
// in it). Every publish goes to A and, through the bus, reaches the subscribers of both. Before
// A serves a publish, while every subscriber is connected, it reads both nodes' /health over
// HTTP and keeps the connection counts, one pair per publish, in *seen.
func twoNodes(t *testing.T) (target Target, seen func() [][2]int64) {
	t.Helper()
	bus := memory.NewBus()
	targetB, _ := startNode(t, session.Config{MaxConnections: 1000}, nil, bus, "b")
	var (
		mu     sync.Mutex
		counts [][2]int64
		errs   []error
	)
	var bases [2]string
	targetA, _ := startNode(t, session.Config{MaxConnections: 1000}, func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				var pair [2]int64
				for k, base := range bases {
					n, err := healthConnections(r.Context(), base)
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					pair[k] = n
				}
				mu.Lock()
				counts = append(counts, pair)
				mu.Unlock()
			}
			api.ServeHTTP(w, r)
		})
	}, bus, "a")
	bases = [2]string{targetA.REST, targetB.REST}
	target = targetA
	target.WS = targetA.WS + "," + targetB.WS
	target.ServerPIDs = []int{os.Getpid(), os.Getpid()}
	return target, func() [][2]int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("reading /health during the run: %v", errs)
		}
		return slices.Clone(counts)
	}
}

// TestFanoutTwoNodes: with --ws naming two nodes, connection i goes to node i mod 2: while the
// events are published each node holds exactly half of the subscribers, by its own /health.
func TestFanoutTwoNodes(t *testing.T) {
	target, seen := twoNodes(t)
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 10, Events: 2, Interval: 1, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 2 || got[0] != [2]int64{5, 5} || got[1] != [2]int64{5, 5} {
		t.Fatalf("connections on node A and B at each publish: %v; want 5 and 5 twice", got)
	}
	if rep.Setup.Established != 10 || !slices.Equal(rep.Setup.PerNode, []int{5, 5}) {
		t.Fatalf("setup %+v; want 10, 5 per node", rep.Setup)
	}
	// Every event reached both nodes (see twoNodes), so the run measured the whole fan-out.
	if d := rep.Delivery; d.Expected != 20 || d.Delivered != 20 || !d.Complete {
		t.Fatalf("delivery %+v; want 20 of 20", d)
	}
	nodes := strings.Split(target.WS, ",")
	if !slices.Equal(rep.Server.Nodes, nodes) || len(rep.Server.PIDs) != 2 {
		t.Fatalf("server %+v; want both nodes and both pids", rep.Server)
	}
	u := rep.ServerUsage
	if u == nil || len(u.Nodes) != 2 || u.Nodes[1].WS != nodes[1] || u.RSSBytes != u.Nodes[0].RSSBytes+u.Nodes[1].RSSBytes ||
		u.CPUSeconds != u.Nodes[0].CPUSeconds+u.Nodes[1].CPUSeconds || u.CPUPerDeliveryMicros != u.CPUSeconds*1e6/20 {
		t.Fatalf("server usage %+v; want two nodes, summed", u)
	}
	checkText(t, rep, "on 2 nodes "+nodes[0]+", "+nodes[1]+", publishing to "+target.REST,
		"per node, in --ws order: 5, 5", "summed over 2 nodes", "    node       "+nodes[1])

	// The HTML report names the nodes in its header.
	_, page := renderPage(t, HTMLReport{Report: rep})
	meta := one(t, page.byAttr("dl", "class", "meta"), "the run's description").allText()
	if !strings.Contains(meta, "nodes "+nodes[0]+", "+nodes[1]) {
		t.Errorf("the header does not list the nodes:\n%s", meta)
	}
}

// TestFanoutBusPID: with --bus-pid the bus server's CPU time is in the server's (the bus is this
// process here, as are both nodes) and is reported apart.
func TestFanoutBusPID(t *testing.T) {
	target, _ := twoNodes(t)
	target.BusPIDs = []int{os.Getpid()}
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 4, Events: 1, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	u := rep.ServerUsage
	if u == nil || len(u.Bus) != 1 || u.Bus[0].PID != os.Getpid() || u.Bus[0].RSSBytes <= 0 ||
		math.Abs(u.CPUSeconds-(u.Nodes[0].CPUSeconds+u.Nodes[1].CPUSeconds+u.Bus[0].CPUSeconds)) > 1e-9 || u.RSSBytes != u.Nodes[0].RSSBytes+u.Nodes[1].RSSBytes {
		t.Fatalf("server usage %+v; want the bus's CPU in the sum and apart, its RSS apart", u)
	}
	checkText(t, rep, "; CPU with the bus server's", "    bus        pid "+strconv.Itoa(os.Getpid()), "(bus pids "+strconv.Itoa(os.Getpid())+")")
}

// TestFanoutTwoNodesProcs: the same over two child processes. 6 subscribers over 2 children
// and 2 nodes are 3 and 3 only if each child numbers its clients from its offset in the run
// (numbering from 0 in each would put 4 on node A).
func TestFanoutTwoNodesProcs(t *testing.T) {
	target, seen := twoNodes(t)
	target = childTarget(t, target, 2)
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 6, Events: 1, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 1 || got[0] != [2]int64{3, 3} {
		t.Fatalf("connections on node A and B at the publish: %v; want 3 and 3", got)
	}
	if rep.Setup.Established != 6 || !slices.Equal(rep.Setup.PerNode, []int{3, 3}) || rep.Generator.Procs != 3 {
		t.Fatalf("setup %+v, generator %+v; want 3 per node from 2 children", rep.Setup, rep.Generator)
	}
}

// TestIdleTwoNodes: with one pid per node, idle reports each node's RSS and connections.
func TestIdleTwoNodes(t *testing.T) {
	target, _ := twoNodes(t)
	rep, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 7, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.ServerRSS
	if r == nil || len(r.Nodes) != 2 || r.Nodes[0].Connections != 4 || r.Nodes[1].Connections != 3 ||
		r.AfterBytes != r.Nodes[0].AfterBytes+r.Nodes[1].AfterBytes || r.Nodes[0].AfterBytes <= 0 {
		t.Fatalf("server RSS %+v; want 4 and 3 connections on the two nodes, summed", r)
	}
	checkText(t, rep, "idle: 7 connections over 2 channels on 2 nodes", "per node, in --ws order: 4, 3", "4 connections,", "3 connections,")
}

// TestCounterSumsNodes: churn's server counts, read from every node's /health (derived from
// its WebSocket URL) and summed; connect numbers clients from first, so clients 1, 2 and 3 go
// to nodes B, A, B.
func TestCounterSumsNodes(t *testing.T) {
	target, _ := twoNodes(t)
	c, err := newCounter(target)
	if err != nil {
		t.Fatal(err)
	}
	nodes := strings.Split(target.WS, ",")
	if want := "http" + strings.TrimPrefix(nodes[0], "ws") + "/health, http" + strings.TrimPrefix(nodes[1], "ws") + "/health"; c.source != want {
		t.Fatalf("source %q; want %q", c.source, want)
	}
	rec := newRecorder([]string{"c"}, 0, nil)
	p, err := newPool(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close(patience)
	s, err := connect(t.Context(), target, p, 1, 3, subSpec{Channels: []string{"c"}}.chansOf())
	if err != nil || !slices.Equal(s.PerNode, []int{1, 2}) {
		t.Fatalf("connect: %+v, %v; want 1 on node A, 2 on B", s, err)
	}
	if got := p.activeOn(2); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("open per node %v; want 1, 2", got)
	}
	n, err := c.read(t.Context())
	if err != nil || n.Connections != 3 || n.Channels != 2 {
		t.Fatalf("counts %+v, %v; want 3 connections and 2 channels (one per node)", n, err)
	}
	a, errA := healthConnections(t.Context(), target.REST)
	b, errB := healthConnections(t.Context(), "http"+strings.TrimPrefix(nodes[1], "ws"))
	if a != 1 || b != 2 || errA != nil || errB != nil {
		t.Fatalf("node A holds %d (%v), B %d (%v); want 1 and 2", a, errA, b, errB)
	}
}

// TestMetricsSumsNodes: --metrics with one endpoint per node: the monitor's sampler and
// churn's counter sum what the nodes say.
func TestMetricsSumsNodes(t *testing.T) {
	node := func(conns, rss int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "# TYPE herald_connected gauge\nherald_connected{app_id=\"a\"} %d\nherald_channels 2\ngo_goroutines 10\nprocess_resident_memory_bytes %d\nprocess_cpu_seconds_total 1.5\n", conns, rss)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	a, b := node(3, 1000), node(4, 2000)
	s := NewMetricsSampler(a+", "+b, "herald_")
	m, err := s.Sample(t.Context())
	want := ServerMetrics{Connections: 7, Channels: 4, Goroutines: 20, RSSBytes: 3000, CPUSeconds: 3}
	if err != nil || m != want {
		t.Fatalf("sample %+v, %v; want %+v", m, err, want)
	}
	if s.URL() != a+", "+b {
		t.Errorf("URL %q; want both", s.URL())
	}
	c, err := newCounter(Target{WS: "ws://127.0.0.1:1,ws://127.0.0.1:2", Metrics: a + "," + b, MetricsPrefix: "herald_"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.read(t.Context())
	if err != nil || n.Connections != 7 || n.Channels != 4 || n.Goroutines == nil || *n.Goroutines != 20 {
		t.Fatalf("counts %+v, %v; want 7 connections, 4 channels, 20 goroutines", n, err)
	}
	if _, err := StartMonitor(t.Context(), MonitorConfig{MetricsURL: a + ",,"}); err == nil || !strings.Contains(err.Error(), "--metrics") {
		t.Errorf("StartMonitor with an empty element: %v; want a --metrics error", err)
	}
}
