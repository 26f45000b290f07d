package session_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// node is one server of an in-process cluster on a memory bus, behind a real HTTP server.
type node struct {
	h      *session.Server
	addr   string
	b      herald.Broker
	events atomic.Int64 // BusEvent messages received
}

// internalInterests are the bus keys every node has interest in: the cluster's state, cache
// channels' events and control messages.
const internalInterests = 3

// gate wraps a broker: Subscribe to a channel waits while the gate is shut, and Connected
// reports down while down is set, as an engine does during an outage.
type gate struct {
	herald.Broker
	mu     sync.Mutex
	shut   chan struct{} // nil: open
	down   atomic.Bool
	calls  atomic.Int64 // Subscribe calls
	failed atomic.Int64 // Subscribe calls that returned an error
}

func (g *gate) Subscribe(ctx context.Context, app, channel string) error {
	if app == "" {
		return g.Broker.Subscribe(ctx, app, channel) // the node's internal keys pass
	}
	g.calls.Add(1)
	g.mu.Lock()
	w := g.shut
	g.mu.Unlock()
	err := g.Broker.Subscribe(ctx, app, channel) // the reference is kept whatever happens
	if w != nil {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err == nil && g.down.Load() {
		err = herald.Errorf(herald.CodeUnavailable, "test: the bus is down")
	}
	if err != nil {
		g.failed.Add(1)
	}
	return err
}

func (g *gate) Connected() bool { return !g.down.Load() && g.Broker.Connected() }

func (g *gate) close() {
	g.mu.Lock()
	if g.shut == nil {
		g.shut = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *gate) open() {
	g.mu.Lock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
	g.mu.Unlock()
}

// startCluster starts n nodes on one memory bus; wrap, when set, wraps each node's broker.
func startCluster(t *testing.T, n int, wrap func(herald.Broker) herald.Broker) []*node {
	t.Helper()
	return startClusterOn(t, memory.NewBus(), n, session.Config{}, cluster.Config{}, wrap)
}

// startClusterOn starts n nodes configured with cfg and sc on bus, named node-0, node-1, ...
func startClusterOn(t *testing.T, bus *memory.Bus, n int, cfg session.Config, sc cluster.Config, wrap func(herald.Broker) herald.Broker) []*node {
	t.Helper()
	nodes := make([]*node, n)
	for i := range nodes {
		nodes[i] = startNode(t, bus, "node-"+strconv.Itoa(i), cfg, sc, wrap, app)
	}
	return nodes
}

// startNode starts one node of apps on bus, as id, its broker wrapped by wrap when set.
func startNode(t *testing.T, bus *memory.Bus, id string, cfg session.Config, sc cluster.Config, wrap func(herald.Broker) herald.Broker, apps ...*herald.App) *node {
	t.Helper()
	return startNodeTap(t, bus, id, cfg, sc, wrap, nil, apps...)
}

// startNodeTap is startNode with tap, when set, in front of the node's handlers: it gets each
// message the bus brings, and hands it on (or not) with deliver.
func startNodeTap(t *testing.T, bus *memory.Bus, id string, cfg session.Config, sc cluster.Config, wrap func(herald.Broker) herald.Broker,
	tap func(m herald.BusMessage, deliver herald.BusHandler), apps ...*herald.App) *node {
	t.Helper()
	return startNodeQueue(t, bus, memory.Config{NodeID: id}, cfg, sc, wrap, tap, apps...)
}

// startNodeQueue is startNodeTap with the memory broker's config mc (its node id, its queue).
func startNodeQueue(t *testing.T, bus *memory.Bus, mc memory.Config, cfg session.Config, sc cluster.Config, wrap func(herald.Broker) herald.Broker,
	tap func(m herald.BusMessage, deliver herald.BusHandler), apps ...*herald.App) *node {
	t.Helper()
	nd := &node{}
	mux := new(broker.Mux)
	mb := bus.Attach(mc, func(m herald.BusMessage) {
		if m.Kind == herald.BusEvent {
			nd.events.Add(1)
		}
		if tap != nil {
			tap(m, mux.Receive)
			return
		}
		mux.Receive(m)
	})
	t.Cleanup(func() { _ = mb.Close(context.Background()) })
	var b herald.Broker = mb
	if wrap != nil {
		b = wrap(b)
	}
	nd.b = b
	nd.h, nd.addr = serveNode(t, cfg, func(eng *fanout.Engine) cluster.State {
		return cluster.NewReplicated(sc, eng, b, memory.NewHistory(mb), mux.Handle, nil)
	}, apps...)
	return nd
}

// join connects a client to nd and subscribes it to channel (a private or presence channel
// when auth is needed), waiting for the confirmation.
func join(t *testing.T, nd *node, channel, user string) (*wstest.Client, string) {
	t.Helper()
	c, sid := dial(t, nd)
	sendSubscribe(t, c, sid, channel, user)
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	return c, sid
}

func dial(t *testing.T, nd *node) (*wstest.Client, string) {
	t.Helper()
	c, err := wstest.Dial(nd.addr, "/app/app-key?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sid, err := c.SocketID(patience)
	if err != nil {
		t.Fatal(err)
	}
	return c, sid
}

func sendSubscribe(t *testing.T, c *wstest.Client, sid, channel, user string) {
	t.Helper()
	var auth, data string
	switch herald.Classify(channel).Kind {
	case herald.Presence:
		auth, data = presenceAuth(sid, channel, user)
	case herald.Private:
		auth = app.Key + ":" + pusher.Sign(app.Secret, sid+":"+channel)
	}
	if err := c.Subscribe(channel, auth, data); err != nil {
		t.Fatal(err)
	}
}

// expectEvents reads until it has seen want events named ev, in order of their data, and
// fails on anything else named ev.
func expectEvents(t *testing.T, c *wstest.Client, ev string, want []string) {
	t.Helper()
	for i := 0; i < len(want); {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatalf("event %d of %d: %v", i, len(want), err)
		}
		if m.Close != 0 {
			t.Fatalf("event %d of %d: closed with %d", i, len(want), m.Close)
		}
		if m.Event != ev {
			continue
		}
		if got := m.DataString(); got != want[i] {
			t.Fatalf("event %d: data %q, want %q", i, got, want[i])
		}
		i++
	}
}

// expectSilence publishes a marker on channel through nd and checks that c receives the
// marker before any event named in evs: whatever c was not to receive would have come first.
func expectSilence(t *testing.T, c *wstest.Client, nd *node, channel string, evs ...string) {
	t.Helper()
	if err := nd.h.Publish("app-id", herald.Event{Name: "marker", Channel: channel, Data: "m"}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatal(err)
		}
		if m.Event == "marker" {
			return
		}
		if slices.Contains(evs, m.Event) {
			t.Fatalf("got %s %q, which must not reach this client", m.Event, m.DataString())
		}
	}
}

func TestClusterPublishReachesEveryNodeOnceInOrder(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	var clients []*wstest.Client
	for _, nd := range nodes[:2] {
		for range 3 {
			c, _ := join(t, nd, "orders", "")
			clients = append(clients, c)
		}
	}
	var want []string
	for i := range 500 {
		want = append(want, strconv.Itoa(i))
		// Alternate the node a publisher talks to: order still holds.
		if err := nodes[i%3].h.Publish("app-id", herald.Event{Name: "e", Channel: "orders", Data: want[i]}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clients {
		expectEvents(t, c, "e", want)
	}
	for _, c := range clients {
		expectSilence(t, c, nodes[0], "orders", "e") // and nothing twice
	}
	// Interest routing: the node with no subscriber received nothing.
	if n, st := nodes[2].events.Load(), nodes[2].b.Stats(); n != 0 || st.Interests != internalInterests {
		t.Fatalf("node without subscribers: received %d events, %d interests; want 0, %d", n, st.Interests, internalInterests)
	}
}

func TestClusterExcludesSocketOnAnotherNode(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	excluded, sid := join(t, nodes[1], "ex", "")
	other, _ := join(t, nodes[1], "ex", "")
	local, _ := join(t, nodes[0], "ex", "")
	if err := nodes[0].h.Publish("app-id", herald.Event{Name: "e", Channel: "ex", Data: "x", SocketID: sid}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, other, "e", []string{"x"})
	expectEvents(t, local, "e", []string{"x"})
	expectSilence(t, excluded, nodes[0], "ex", "e")
}

func TestClusterClientEventsCrossNodes(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	for _, channel := range []string{"private-chat", "presence-chat"} {
		t.Run(channel, func(t *testing.T) {
			sender, _ := join(t, nodes[0], channel, "alice")
			peer, _ := join(t, nodes[1], channel, "bob")
			// Ten: the default client-event rate is ten a second.
			for i := range 10 {
				if err := sender.WriteJSON(map[string]any{"event": "client-msg", "channel": channel, "data": strconv.Itoa(i)}); err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			for i := range 10 {
				want = append(want, strconv.Itoa(i))
			}
			expectEvents(t, peer, "client-msg", want)
			expectSilence(t, sender, nodes[1], channel, "client-msg") // never echoed
		})
	}
}

// TestClusterConfirmsOnlyOnceTheBusHasTheInterest: a subscriber is confirmed only when the
// bus has this node's interest, so an event another node publishes after the confirmation is
// never missed; subscribers that leave before it hold nothing.
func TestClusterConfirmsOnlyOnceTheBusHasTheInterest(t *testing.T) {
	var g *gate
	nodes := startCluster(t, 2, func(b herald.Broker) herald.Broker {
		if g == nil {
			g = &gate{Broker: b}
			return g
		}
		return b
	})
	g.close()
	c, sid := dial(t, nodes[0])
	sendSubscribe(t, c, sid, "private-slow", "")
	quitter, qsid := dial(t, nodes[0])
	sendSubscribe(t, quitter, qsid, "private-slow", "")
	poll.Until(t, patience, "the subscribe on the bus", func() (bool, string) {
		return g.calls.Load() == 1, fmt.Sprint(g.calls.Load(), " calls")
	})
	// Still waiting: a client event is refused, nothing is confirmed.
	if err := c.WriteJSON(map[string]any{"event": "client-x", "channel": "private-slow", "data": "{}"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Read(patience)
	if err != nil || m.Event != "pusher:error" {
		t.Fatalf("client event before confirmation: got %+v, %v; want pusher:error", m, err)
	}
	quitter.Close()
	poll.Until(t, patience, "the quitter to leave", func() (bool, string) {
		st := nodes[0].h.Stats()
		return st.Connections == 1, fmt.Sprint(st.Connections, " connections")
	})
	g.open()
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].h.Publish("app-id", herald.Event{Name: "e", Channel: "private-slow", Data: "after"}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, c, "e", []string{"after"})
	c.Close()
	poll.Until(t, patience, "the interest to go", func() (bool, string) {
		st := nodes[0].b.Stats()
		return st.Interests == internalInterests && nodes[0].h.Stats().Channels == 0, fmt.Sprint(st.Interests, " interests")
	})
}

// TestClusterSubscribeWaitsOutABusOutage: while the bus refuses the interest, the subscriber
// waits; once the bus is back it is confirmed, and cross-node events reach it.
func TestClusterSubscribeWaitsOutABusOutage(t *testing.T) {
	var g *gate
	nodes := startCluster(t, 2, func(b herald.Broker) herald.Broker {
		if g == nil {
			g = &gate{Broker: b}
			return g
		}
		return b
	})
	g.down.Store(true)
	c, sid := dial(t, nodes[0])
	sendSubscribe(t, c, sid, "outage", "")
	poll.Until(t, patience, "subscribes refused by the bus", func() (bool, string) {
		return g.failed.Load() >= 2, fmt.Sprint(g.failed.Load(), " failed")
	})
	// A REST publish on the node whose bus is down is refused and reaches no one.
	err := nodes[0].h.Publish("app-id", herald.Event{Name: "e", Channel: "outage", Data: "refused"})
	if herald.CodeOf(err) != herald.CodeUnavailable {
		t.Fatalf("publish with the bus down: %v; want CodeUnavailable", err)
	}
	g.down.Store(false)
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].h.Publish("app-id", herald.Event{Name: "e", Channel: "outage", Data: "back"}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, c, "e", []string{"back"}) // the refused one never arrives first
}

// TestClusterPresenceFullOnConfirmation: subscribers that waited for the bus are admitted to
// a presence channel in order, and the one over the limit is refused with 4100 and holds
// nothing.
func TestClusterPresenceFullOnConfirmation(t *testing.T) {
	small := *app
	small.Limits.MaxPresenceMembers = 1
	var g *gate
	nd := startNode(t, memory.NewBus(), "a", session.Config{}, cluster.Config{}, func(b herald.Broker) herald.Broker {
		g = &gate{Broker: b}
		return g
	}, &small)
	h := nd.h
	g.close()
	first, sid1 := dial(t, nd)
	sendSubscribe(t, first, sid1, "presence-room", "u1")
	poll.Until(t, patience, "the subscribe on the bus", func() (bool, string) {
		return g.calls.Load() == 1, fmt.Sprint(g.calls.Load(), " calls")
	})
	second, sid2 := dial(t, nd)
	sendSubscribe(t, second, sid2, "presence-room", "u2")
	poll.Until(t, patience, "both waiting", func() (bool, string) {
		st, _ := h.Channel("app-id", "presence-room")
		return st.SubscriptionCount == 2, fmt.Sprint(st.SubscriptionCount, " subscriptions")
	})
	g.open()
	if _, err := first.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	m, err := second.Expect("pusher:subscription_error", patience)
	if err != nil || !strings.Contains(string(m.Data), "4100") {
		t.Fatalf("second member: %+v %v; want subscription_error 4100", m, err)
	}
	poll.Until(t, patience, "the refused member's reference to go", func() (bool, string) {
		st, _ := h.Channel("app-id", "presence-room")
		return st.SubscriptionCount == 1 && st.UserCount == 1, fmt.Sprintf("%+v", st)
	})
	// The refused subscription holds nothing: subscribing again is not "already subscribed".
	sendSubscribe(t, second, sid2, "presence-room", "u2")
	if m, err := second.Expect("pusher:subscription_error", patience); err != nil || !strings.Contains(string(m.Data), "4100") {
		t.Fatalf("second try: %+v %v; want the channel full again (4100), not already subscribed", m, err)
	}
	first.Close()
	second.Close()
	poll.Until(t, patience, "channels and interests back to 0", func() (bool, string) {
		return h.Stats().Channels == 0 && g.Stats().Interests == internalInterests, fmt.Sprint(h.Stats().Channels, " channels, ", g.Stats().Interests, " interests")
	})
}

// TestClusterChurnLeavesNoInterest: clients joining and leaving channels at once, while the
// bus confirms slowly, leave no channel and no interest behind.
func TestClusterChurnLeavesNoInterest(t *testing.T) {
	var g *gate
	nodes := startCluster(t, 2, func(b herald.Broker) herald.Broker {
		if g == nil {
			g = &gate{Broker: b}
			return g
		}
		return b
	})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if i%10 == 0 {
					g.close()
				} else if i%10 == 5 {
					g.open()
				}
				c, err := wstest.Dial(nodes[0].addr, "/app/app-key?protocol=7")
				if err != nil {
					errs <- err
					return
				}
				sid, err := c.SocketID(patience)
				if err == nil {
					ch := fmt.Sprint("churn-", (w*40+i)%7)
					if i%3 == 0 {
						ch = "presence-" + ch
					}
					var auth, data string
					if i%3 == 0 {
						auth, data = presenceAuth(sid, ch, fmt.Sprint("u", i))
					}
					err = c.Subscribe(ch, auth, data)
					if err == nil && i%2 == 0 {
						err = c.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]string{"channel": ch}})
					}
				}
				c.Close()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	g.open()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	poll.Until(t, patience, "connections, channels and interests back to 0", func() (bool, string) {
		st := nodes[0].h.Stats()
		bs := g.Stats()
		return st.Connections == 0 && st.Channels == 0 && bs.Interests == internalInterests,
			fmt.Sprintf("%d connections, %d channels, %d interests", st.Connections, st.Channels, bs.Interests)
	})
}
