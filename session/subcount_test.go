package session_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// countingApp is the tests' app with subscription count events switched on.
func countingApp() *herald.App {
	a := *app
	a.EnableSubscriptionCountEvent = true
	return &a
}

// nextCount reads c until a pusher_internal:subscription_count and returns its channel and count.
func nextCount(t *testing.T, c *wstest.Client) (string, int) {
	t.Helper()
	for {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatalf("waiting for a subscription count: %v", err)
		}
		if m.Close != 0 {
			t.Fatalf("waiting for a subscription count: closed with %d", m.Close)
		}
		if m.Event != "pusher_internal:subscription_count" {
			continue
		}
		var d struct {
			N *int `json:"subscription_count"`
		}
		if err := json.Unmarshal([]byte(m.DataString()), &d); err != nil || d.N == nil {
			t.Fatalf("subscription_count data %q: %v", m.DataString(), err)
		}
		return m.Channel, *d.N
	}
}

// waitCount reads c until channel's count is want, and fails on a count for another channel.
func waitCount(t *testing.T, c *wstest.Client, channel string, want int) {
	t.Helper()
	for {
		ch, n := nextCount(t, c)
		if ch != channel {
			t.Fatalf("subscription count for %s (%d), want only %s", ch, n, channel)
		}
		if n == want {
			return
		}
	}
}

// TestSubscriptionCount: on an app that enables them, a subscriber gets its channel's count
// after subscribing and whenever it changes (a join, an unsubscribe, a disconnect); a
// presence channel gets none (its members are counted by member events).
func TestSubscriptionCount(t *testing.T) {
	nd := startCountCluster(t, 1)[0] // a single node: no broker
	a, _ := join(t, nd, "room", "")
	waitCount(t, a, "room", 1)
	b, _ := join(t, nd, "room", "")
	waitCount(t, a, "room", 2)
	waitCount(t, b, "room", 2)
	c, _ := join(t, nd, "private-room", "")
	waitCount(t, c, "private-room", 1)
	if err := b.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]string{"channel": "room"}}); err != nil {
		t.Fatal(err)
	}
	waitCount(t, a, "room", 1)
	b2, _ := join(t, nd, "room", "")
	waitCount(t, a, "room", 2)
	b2.Close()
	waitCount(t, a, "room", 1)

	// A presence channel, then two markers in later rounds: a count for the presence channel
	// would have come first (it was marked before either marker's round).
	p, sid := dial(t, nd)
	sendSubscribe(t, p, sid, "presence-room", "u1")
	if _, err := p.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	for _, marker := range []string{"marker-1", "marker-2"} {
		sendSubscribe(t, p, sid, marker, "")
		for {
			ch, n := nextCount(t, p)
			if ch == "presence-room" {
				t.Fatalf("a presence channel got a subscription count (%d)", n)
			}
			if ch == marker {
				break
			}
		}
	}
}

// TestSubscriptionCountCoalesced: 40 clients join a channel as fast as they can; its first
// subscriber gets the counts coalesced, at most one per interval and the round it
// started in, and the last one it gets is the final count.
func TestSubscriptionCountCoalesced(t *testing.T) {
	nd := startCountCluster(t, 1)[0]
	first, _ := join(t, nd, "crowd", "")
	waitCount(t, first, "crowd", 1)
	start := time.Now()
	const joiners = 40
	for range joiners {
		c, sid := dial(t, nd)
		sendSubscribe(t, c, sid, "crowd", "")
	}
	events := 0
	for {
		_, n := nextCount(t, first)
		events++
		if n == joiners+1 {
			break
		}
	}
	took := time.Since(start)
	if most := int(took/countInterval) + 2; events > most {
		t.Errorf("%d count events in %v: more than one per %v", events, took, countInterval)
	}
	t.Logf("%d joins: %d count events in %v", joiners, events, took)
}

// TestSubscriptionCountClusterWide: in a cluster every subscriber gets the cluster's count,
// whichever node it is on, and a leave on one node lowers it on the others.
func TestSubscriptionCountClusterWide(t *testing.T) {
	nodes := startCountCluster(t, 2)
	a, _ := join(t, nodes[0], "room", "")
	waitCount(t, a, "room", 1)
	b, _ := join(t, nodes[1], "room", "")
	waitCount(t, b, "room", 2)
	waitCount(t, a, "room", 2)
	c, _ := join(t, nodes[1], "room", "")
	waitCount(t, a, "room", 3)
	waitCount(t, c, "room", 3)
	c.Close()
	waitCount(t, a, "room", 2)
	waitCount(t, b, "room", 2)
}

// countInterval is the tests' Config.SubscriptionCountInterval.
const countInterval = 100 * time.Millisecond

// startCountCluster starts n servers of countingApp on one memory bus, with a fast state
// heartbeat; with n = 1 the server has no broker at all.
func startCountCluster(t *testing.T, n int) []*node {
	t.Helper()
	bus := memory.NewBus()
	nodes := make([]*node, n)
	for i := range nodes {
		cfg := session.Config{SubscriptionCountInterval: countInterval}
		if n == 1 {
			h, addr := startServerState(t, cfg, fastState, countingApp())
			nodes[i] = &node{h: h, addr: addr}
			continue
		}
		nodes[i] = startNode(t, bus, "node-"+strconv.Itoa(i), cfg, fastState, nil, countingApp())
	}
	return nodes
}
