package session_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// originObserver records the origin latencies one node observes, in seconds.
type originObserver struct {
	mu   sync.Mutex
	vals []float64
}

func (o *originObserver) Observe(v float64) {
	o.mu.Lock()
	o.vals = append(o.vals, v)
	o.mu.Unlock()
}

func (o *originObserver) values() []float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]float64(nil), o.vals...)
}

// expectOrigins waits until o has len(min) observations and checks that, both in ascending
// order, the i-th is at least min[i] seconds and under a minute (a unit mistake, not a slow
// machine). Events of different channels may be observed in any order.
func expectOrigins(t *testing.T, name string, o *originObserver, min ...float64) {
	t.Helper()
	poll.Until(t, patience, fmt.Sprintf("%s to observe %d origin latencies", name, len(min)), func() (bool, string) {
		got := o.values()
		return len(got) >= len(min), fmt.Sprint(got)
	})
	got := o.values()
	if len(got) != len(min) {
		t.Fatalf("%s observed %v, want %d origin latencies", name, got, len(min))
	}
	slices.Sort(got)
	slices.Sort(min)
	for i, v := range got {
		if v < min[i] || v >= 60 {
			t.Errorf("%s origin latencies %v: want at least %v seconds (and under a minute)", name, got, min)
			return
		}
	}
}

// expectAll reads from c until it has received every event of evs, in whatever order.
func expectAll(t *testing.T, c *wstest.Client, evs []herald.Event) {
	t.Helper()
	left := map[string]bool{}
	for _, ev := range evs {
		left[ev.Name] = true
	}
	for len(left) > 0 {
		m, err := c.Read(patience)
		if err != nil || m.Close != 0 {
			t.Fatalf("waiting for %v: %v (close %d)", left, err, m.Close)
		}
		delete(left, m.Event)
	}
}

// subscribeTo connects a client to addr and subscribes it to each public channel.
func subscribeTo(t *testing.T, addr string, channels ...string) *wstest.Client {
	t.Helper()
	c := dialWith(t, addr, "/app/app-key", "", nil)
	expectConnected(t, c)
	for _, ch := range channels {
		if err := c.Subscribe(ch, "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestOriginLatencySingleNode: an event with an origin 2 s in the past is observed at 2 s or
// more once its frames are queued, on a plain and on a cache channel; an event without one
// (or with Kafka's -1 ms) is observed by the publish latency only.
func TestOriginLatencySingleNode(t *testing.T) {
	origin, publish := &originObserver{}, &countObserver{}
	h, addr := startServer(t, session.Config{Workers: 2,
		OriginLatency:  func(string) fanout.Observer { return origin },
		PublishLatency: func(string) fanout.Observer { return publish }})
	cs := []*wstest.Client{subscribeTo(t, addr, "m", "cache-m"), subscribeTo(t, addr, "m", "cache-m"), subscribeTo(t, addr, "m", "cache-m")}
	now := time.Now()
	evs := []herald.Event{
		{Name: "e1", Channel: "m", Data: "1", Origin: now.Add(-2 * time.Second)},
		{Name: "e2", Channel: "cache-m", Data: "2", Origin: now.Add(-2 * time.Second)},
		{Name: "e3", Channel: "m", Data: "3"},                               // no origin: nothing to observe
		{Name: "e3b", Channel: "m", Data: "3b", Origin: time.UnixMilli(-1)}, // Kafka's "no timestamp": none either
		{Name: "e4", Channel: "m", Data: "4", Origin: now.Add(-3 * time.Second)},
	}
	for _, ev := range evs {
		if err := h.Publish("app-id", ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs {
		expectAll(t, c, evs)
	}
	// The workers queue each channel's frames in publish order, so e3's and e3b's
	// observations, had they one, would come before e4's.
	expectOrigins(t, "the node", origin, 2, 2, 3)
	poll.Until(t, patience, "5 publish latencies", func() (bool, string) {
		return publish.n.Load() == 5, fmt.Sprint(publish.n.Load())
	})
}

// TestOriginLatencyCluster: in a cluster the origin travels through the bus with the event,
// and every node that delivers it observes origin → its own frames queued, for plain and
// cache channels; a node without subscribers (here the one that publishes, as an ingest
// node may) observes nothing, nor does anyone for an event without an origin.
func TestOriginLatencyCluster(t *testing.T) {
	var mu sync.Mutex
	var obs []*originObserver // by node: New asks once per app, and the nodes start in order
	cfg := session.Config{Workers: 2, OriginLatency: func(string) fanout.Observer {
		mu.Lock()
		defer mu.Unlock()
		o := &originObserver{}
		obs = append(obs, o)
		return o
	}}
	nodes := startClusterOn(t, memory.NewBus(), 3, cfg, cluster.Config{}, nil)
	if len(obs) != 3 {
		t.Fatalf("%d origin observers for 3 nodes of one app", len(obs))
	}
	var cs []*wstest.Client
	for _, nd := range nodes[:2] {
		cs = append(cs, subscribeTo(t, nd.addr, "m", "cache-m"), subscribeTo(t, nd.addr, "m", "cache-m"))
	}
	now := time.Now()
	evs := []herald.Event{
		{Name: "e1", Channel: "m", Data: "1", Origin: now.Add(-2 * time.Second)},
		{Name: "e2", Channel: "cache-m", Data: "2", Origin: now.Add(-2 * time.Second)},
		{Name: "e3", Channel: "m", Data: "3"},
		{Name: "e4", Channel: "m", Data: "4", Origin: now.Add(-3 * time.Second)},
	}
	for _, ev := range evs {
		if err := nodes[2].h.Publish("app-id", ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs {
		expectAll(t, c, evs)
	}
	// e3 and e4 share a channel, so e3's observation, had it one, would come before e4's.
	expectOrigins(t, "node 0", obs[0], 2, 2, 3)
	expectOrigins(t, "node 1", obs[1], 2, 2, 3)
	if got := obs[2].values(); len(got) != 0 {
		t.Errorf("node 2 has no subscribers but observed %v", got)
	}
}
