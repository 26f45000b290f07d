package bench

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/session"
)

// TestRecoverKillNode: three nodes on one bus, 30 clients round robin over them; the third
// node is killed (its session server shut down): its 10 clients alone reconnect, 5 to each live node,
// and recover every event published while they were away; the 20 others stay and get every
// event live.
func TestRecoverKillNode(t *testing.T) {
	app := testApp
	app.History = []herald.HistoryRule{{Channels: "recover*", Size: 1000, TTL: time.Hour}}
	bus := memory.NewBus()
	a, _ := startNodeOf(t, app, session.Config{MaxConnections: 1000}, nil, bus, "a")
	b, _ := startNodeOf(t, app, session.Config{MaxConnections: 1000}, nil, bus, "b")
	c, hc := startNodeOf(t, app, session.Config{MaxConnections: 1000}, nil, bus, "c")
	target := a
	target.WS = a.WS + "," + b.WS + "," + c.WS
	killed := 0
	kill := func() error {
		killed++
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		return hc.Shutdown(ctx)
	}
	rep, err := Recover(t.Context(), RecoverConfig{Target: target, Clients: 30, Channels: 2, Outage: 100 * time.Millisecond,
		Events: 10, Before: 2, After: 2, Wait: patience, Kill: kill, KillNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	if killed != 1 || rep.Kill == nil || rep.Kill.Clients != 10 || rep.Stayed != 20 || rep.Kill.AllSeconds <= 0 {
		t.Fatalf("killed %d times, kill %+v, stayed %d; want node 2's 10 clients gone once, 20 staying", killed, rep.Kill, rep.Stayed)
	}
	rc := rep.Recovery
	if rc.Recovered != 10 || rc.Failed != 0 || !rc.Complete || rc.Replayed < 10*10 || rc.PositionErrors != 0 || rc.LateEvents != 0 {
		t.Fatalf("recovery %+v; want the killed node's 10 clients recovered", rc)
	}
	if !slices.Equal(rep.Reconnect.PerNode, []int{5, 5, 0}) || rep.Reconnect.Established != 10 {
		t.Fatalf("reconnect %+v; want 5 on each live node, none on the killed one", rep.Reconnect)
	}
	if d := rep.Delivery; d.Expected != 30*(2+10+2) || !d.Clean() || rep.Lost.Count != 0 {
		t.Fatalf("delivery %+v, lost %+v; want every client to have every event once, in order", d, rep.Lost)
	}
	if !rep.Clean() {
		t.Fatalf("report not clean: %+v", rep)
	}
	checkText(t, rep, "node 2 killed: its 10 clients", "20 clients of the other nodes stayed", "recovered    10 of 10", "from the kill",
		"round robin over the live nodes [5 5 0]")
	checkJSON(t, rep, "gone_seconds")
}

// TestRecoverKillChecks: a node's death needs a cluster, a node in it, and publishes to a
// live node.
func TestRecoverKillChecks(t *testing.T) {
	kill := func() error { return nil }
	base := Target{WS: "ws://127.0.0.1:1,ws://127.0.0.1:2,ws://127.0.0.1:3", REST: "http://127.0.0.1:1"}
	for _, tc := range []struct {
		cfg  RecoverConfig
		want string
	}{
		{RecoverConfig{Target: Target{WS: "ws://127.0.0.1:1", REST: "http://127.0.0.1:2"}, Kill: kill}, "needs a cluster"},
		{RecoverConfig{Target: base, Kill: kill, KillNode: 3}, "--kill-node 3: the nodes are 0 to 2"},
		{RecoverConfig{Target: base, Kill: kill, KillNode: 0}, "names the node --kill-node 0 kills"},
		{RecoverConfig{Target: base, Kill: kill, KillNode: 1, SwitchNodes: true}, "--switch-nodes"},
	} {
		_, err := Recover(t.Context(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg.Target, err, tc.want)
		}
	}
	cfg := RecoverConfig{KillNode: 1}
	var got []int
	for i := range 6 {
		got = append(got, cfg.liveRoute(i, 3))
	}
	if !slices.Equal(got, []int{0, 2, 0, 2, 0, 2}) {
		t.Errorf("live route with node 1 dead: %v", got)
	}
}

// TestSources: clients connect from as many loopback addresses as Sources says, client i
// always from the same one.
func TestSources(t *testing.T) {
	for _, tc := range []struct {
		i, n int
		want string
	}{{0, 0, "127.0.0.1"}, {8, 0, "127.0.0.1"}, {7, 0, "127.0.0.8"}, {254, 1000, "127.0.0.255"}, {255, 1000, "127.0.1.0"},
		{70000, 100000, "127.1.17.113"}, {MaxSources - 1, MaxSources, "127.255.255.254"}} {
		if got := sourceAddr(tc.i, tc.n).String(); got != tc.want {
			t.Errorf("sourceAddr(%d, %d) = %s, want %s", tc.i, tc.n, got, tc.want)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	target := startHerald(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Upgrade") != "" {
				host, _, _ := net.SplitHostPort(r.RemoteAddr)
				mu.Lock()
				seen[host]++
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	target.Sources = 300
	rep, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 600, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.Established != 600 {
		t.Fatalf("setup %+v", rep.Setup)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 300 || seen["127.0.1.44"] != 2 {
		t.Fatalf("%d source addresses seen (127.0.1.44: %d), want 300 of 2 clients each", len(seen), seen["127.0.1.44"])
	}
	if err := (Target{Sources: MaxSources + 1}).Check(); err == nil || !strings.Contains(err.Error(), "--sources") {
		t.Errorf("Sources over the most: %v", err)
	}
}
