package session_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// lossy is a node's broker whose Stats count the messages its tap dropped, as an engine
// counts those it drops when its queue is full.
type lossy struct {
	herald.Broker
	dropped *atomic.Uint64
}

func (l lossy) Stats() herald.BrokerStats {
	st := l.Broker.Stats()
	st.Dropped += l.dropped.Load()
	return st
}

// startLossyNode starts a node of apps on bus whose bus loses the history events drop says.
func startLossyNode(t *testing.T, bus *memory.Bus, id string, drop func(m herald.BusMessage) bool, apps ...*herald.App) (*node, *atomic.Uint64) {
	t.Helper()
	return startEngineNode(t, memoryEngine(bus), id, drop, apps...)
}

// engine connects a node to a cluster bus and its history store.
type engine func(t *testing.T, id string, h herald.BusHandler) (herald.Broker, herald.History)

func memoryEngine(bus *memory.Bus) engine {
	return func(t *testing.T, id string, h herald.BusHandler) (herald.Broker, herald.History) {
		b := bus.Attach(memory.Config{NodeID: id}, h)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b, memory.NewHistory(b)
	}
}

// realEngines are Redis and NATS with JetStream, each a server of its own, the nodes of a
// test on a bus prefix of their own.
func realEngines(t *testing.T) map[string]engine {
	rs, ns := servicetest.Redis(t), servicetest.NATSJetStream(t)
	prefix := func(t *testing.T) string { return "h" + strconv.FormatInt(time.Now().UnixNano(), 36) }
	return map[string]engine{
		"redis": func(t *testing.T, id string, h herald.BusHandler) (herald.Broker, herald.History) {
			b, err := redis.New(redis.Config{URL: rs.URL(), Common: broker.Common{NodeID: id, Prefix: prefixOf(t, prefix)}}, h)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			return b, redis.NewHistory(b)
		},
		"nats": func(t *testing.T, id string, h herald.BusHandler) (herald.Broker, herald.History) {
			b, err := nats.New(nats.Config{URL: ns.URL(), Common: broker.Common{NodeID: id, Prefix: prefixOf(t, prefix)}}, h)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			hist, err := nats.NewHistory(b)
			if err != nil {
				t.Fatal(err)
			}
			return b, hist
		},
	}
}

var (
	prefixMu sync.Mutex
	prefixes = map[*testing.T]string{}
)

// prefixOf is one bus prefix per test, made by mk on its first call.
func prefixOf(t *testing.T, mk func(*testing.T) string) string {
	prefixMu.Lock()
	defer prefixMu.Unlock()
	p, ok := prefixes[t]
	if !ok {
		p = mk(t)
		prefixes[t] = p
	}
	return p
}

// startEngineNode starts a node of apps on en whose bus loses the history events drop says.
func startEngineNode(t *testing.T, en engine, id string, drop func(m herald.BusMessage) bool, apps ...*herald.App) (*node, *atomic.Uint64) {
	t.Helper()
	dropped := new(atomic.Uint64)
	nd := &node{}
	mux := new(broker.Mux)
	b, hist := en(t, id, func(m herald.BusMessage) {
		if m.Kind == herald.BusEvent && m.Offset != 0 && drop(m) {
			dropped.Add(1)
			return
		}
		mux.Receive(m)
	})
	nd.b = lossy{b, dropped}
	nd.h, nd.addr = serveNode(t, session.Config{}, func(eng *fanout.Engine) cluster.State {
		return cluster.NewReplicated(cluster.Config{}, eng, nd.b, hist, mux.Handle, nil)
	}, apps...)
	return nd, dropped
}

// readHistory reads events from c until it has n of them, checking that they come with
// consecutive positions from first; it returns their data.
func readHistory(t *testing.T, c *wstest.Client, n int, first uint64) []string {
	t.Helper()
	var out []string
	var pos position
	want := first
	for len(out) < n {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
		switch m.Event {
		case "pusher_internal:position":
			if pos = decodePosition(t, m); pos.Offset != want {
				t.Fatalf("event %d of %d: position %+v, want offset %d", len(out), n, pos, want)
			}
		case "bid":
			if pos.Offset != want {
				t.Fatalf("event %d (%s) without its position", len(out), m.DataString())
			}
			out = append(out, m.DataString())
			want++
		default:
			if m.Close != 0 {
				t.Fatalf("after %d of %d events: closed with %d", len(out), n, m.Close)
			}
		}
	}
	return out
}

// TestHistoryLossyBus: three nodes whose bus loses 1 % of history channels' events at
// random, two publishing at once: every subscriber on every node gets every event once, in
// offset order (each publisher's events in its order), the gaps repaired from the history.
// On the memory bus, Redis and NATS with JetStream.
func TestHistoryLossyBus(t *testing.T) {
	t.Run("memory", func(t *testing.T) { lossyBus(t, memoryEngine(memory.NewBus())) })
	for name, en := range realEngines(t) {
		t.Run(name, func(t *testing.T) { lossyBus(t, en) })
	}
}

func lossyBus(t *testing.T, en engine) {
	lossyApp := *historyApp
	lossyApp.History = []herald.HistoryRule{{Channels: "auction-*", Size: 5000, TTL: time.Minute}}
	var nodes []*node
	var drops []*atomic.Uint64
	for i := range 3 {
		var mu sync.Mutex
		r := rand.New(rand.NewPCG(uint64(i), 7))
		nd, d := startEngineNode(t, en, "node-"+strconv.Itoa(i), func(herald.BusMessage) bool {
			mu.Lock()
			defer mu.Unlock()
			return r.IntN(100) == 0
		}, &lossyApp)
		nodes, drops = append(nodes, nd), append(drops, d)
	}
	var subs []*wstest.Client
	for _, nd := range nodes {
		for range 2 {
			c, _ := join(t, nd, "auction-lossy", "")
			subs = append(subs, c)
		}
	}
	const per = 600
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := nodes[p].h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-lossy", Data: fmt.Sprintf("p%d-%d", p, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, c := range subs {
		got := readHistory(t, c, 2*per, 1)
		next := [2]int{}
		for _, d := range got {
			var p, k int
			if _, err := fmt.Sscanf(d, "p%d-%d", &p, &k); err != nil || k != next[p] {
				t.Fatalf("subscriber %d: event %s out of its publisher's order (next %v)", i, d, next)
			}
			next[p]++
		}
	}
	var dropped, repaired int64
	for i, nd := range nodes {
		dropped += int64(drops[i].Load())
		r, _, _ := nd.h.HistoryStats()
		repaired += r
	}
	if dropped == 0 || repaired == 0 {
		t.Fatalf("the bus dropped %d events and %d gaps were repaired: the test proved nothing", dropped, repaired)
	}
	t.Logf("%d events dropped by the bus, %d gaps repaired", dropped, repaired)
}

// TestHistoryGapLost: a node that missed events its history no longer keeps closes its
// subscribers of the channel with 4200 (pusher-js reconnects, and recovers or learns it
// cannot); the other node's subscribers go on.
func TestHistoryGapLost(t *testing.T) {
	small := *historyApp
	small.History = []herald.HistoryRule{{Channels: "auction-*", Size: 2, TTL: time.Minute}}
	bus := memory.NewBus()
	n0, _ := startLossyNode(t, bus, "node-0", func(herald.BusMessage) bool { return false }, &small)
	n1, _ := startLossyNode(t, bus, "node-1", func(m herald.BusMessage) bool { return m.Offset >= 3 && m.Offset <= 8 }, &small)
	c0, _ := join(t, n0, "auction-gone", "")
	c1, _ := join(t, n1, "auction-gone", "")
	for i := 1; i <= 9; i++ {
		if err := n0.h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-gone", Data: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	readHistory(t, c0, 9, 1)
	readHistory(t, c1, 2, 1)
	if code, err := c1.ExpectClose(patience); err != nil || code != 4200 {
		t.Fatalf("node 1's subscriber: close %d, %v; want 4200", code, err)
	}
	if _, lost, _ := n1.h.HistoryStats(); lost != 1 {
		t.Fatalf("node 1 counted %d lost gaps, want 1", lost)
	}
}

// TestHistoryRecoverOnAnotherNode: a subscriber of node 0 that reconnects to node 1, which had
// no subscriber of the channel, recovers what it missed from the bus's history.
func TestHistoryRecoverOnAnotherNode(t *testing.T) {
	bus := memory.NewBus()
	n0, _ := startLossyNode(t, bus, "node-0", func(herald.BusMessage) bool { return false }, historyApp)
	n1, _ := startLossyNode(t, bus, "node-1", func(herald.BusMessage) bool { return false }, historyApp)
	c, _ := dial(t, n0)
	subscribeRecover(t, c, "auction-move", nil)
	if err := n0.h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-move", Data: "1"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Expect("pusher_internal:position", patience)
	if err != nil {
		t.Fatal(err)
	}
	first := decodePosition(t, m)
	c.Close()
	for i := 2; i <= 4; i++ {
		if err := n0.h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-move", Data: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ = dial(t, n1)
	events, _, rec2 := subscribeRecover(t, c, "auction-move", &herald.Position{Epoch: first.Epoch, Offset: first.Offset})
	if fmt.Sprint(events) != "[2 3 4]" || rec2.Recovered == nil || !*rec2.Recovered || rec2.Offset != 4 {
		t.Fatalf("recovered %v, %+v; want [2 3 4] and recovered at 4", events, rec2)
	}
}
