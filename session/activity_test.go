package session_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// recorder is an ActivityObserver that keeps what it hears.
type recorder struct {
	want herald.ActivitySet
	mu   sync.Mutex
	got  []herald.Activity
}

func (r *recorder) Wants() herald.ActivitySet { return r.want }

func (r *recorder) Observe(a *herald.Activity) {
	r.mu.Lock()
	r.got = append(r.got, *a)
	r.mu.Unlock()
}

// list returns what r heard of the kinds given, as "kind channel user" lines (and the
// fields named by detail for some kinds).
func (r *recorder) list(kinds ...herald.ActivityKind) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.got {
		if len(kinds) > 0 && !slices.Contains(kinds, a.Kind) {
			continue
		}
		s := a.Kind.String() + " " + a.Channel
		if a.UserID != "" {
			s += " " + a.UserID
		}
		if a.Kind == herald.SubscriptionCount {
			s += fmt.Sprintf(" %d", a.Count)
		}
		out = append(out, s)
	}
	return out
}

func (r *recorder) find(k herald.ActivityKind) []herald.Activity {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []herald.Activity
	for _, a := range r.got {
		if a.Kind == k {
			out = append(out, a)
		}
	}
	return out
}

// expectList waits until r's list of kinds is want, and fails on anything else.
func expectList(t *testing.T, r *recorder, want []string, kinds ...herald.ActivityKind) {
	t.Helper()
	poll.Until(t, patience, strings.Join(want, "; "), func() (bool, string) {
		got := r.list(kinds...)
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("activity %q, want %q", got, want)
		}
		return len(got) == len(want), fmt.Sprint(got)
	})
}

var allKinds = herald.ActivitySet(^uint32(0))

func observe(t *testing.T, h *session.Server, want herald.ActivitySet) *recorder {
	t.Helper()
	r := &recorder{want: want}
	detach, err := h.Observe("app-id", r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(detach)
	return r
}

// TestActivitySingleNode: every kind is reported where it happens, with its fields.
func TestActivitySingleNode(t *testing.T) {
	h, addr := startServer(t, session.Config{})
	if _, err := h.Observe("nope", &recorder{}); err == nil {
		t.Fatal("observing an unknown app: no error")
	}
	r := observe(t, h, allKinds)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a, err := wstest.HandshakeWith(nc, addr, "/app/app-key?protocol=7", map[string]string{"Origin": "https://site.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sidA, err := a.SocketID(patience)
	if err != nil {
		t.Fatal(err)
	}
	b, sidB := dial(t, &node{h: h, addr: addr})
	poll.Until(t, patience, "two connection_opened", func() (bool, string) {
		return len(r.find(herald.ConnectionOpened)) == 2, fmt.Sprint(r.list())
	})
	// Each is reported as its connection reaches its worker: in either order.
	for _, op := range r.find(herald.ConnectionOpened) {
		if op.SocketID != sidA && op.SocketID != sidB || op.App != "app-id" || op.Time.IsZero() {
			t.Fatalf("connection_opened %+v, want socket %s or %s", op, sidA, sidB)
		}
		if op.SocketID == sidA && op.Origin != "https://site.example" {
			t.Fatalf("connection_opened %+v: want the origin of %s", op, sidA)
		}
	}

	const ch = "presence-act"
	for _, c := range []struct {
		c   *wstest.Client
		sid string
	}{{a, sidA}, {b, sidB}} { // the same user twice: one member_added
		sendSubscribe(t, c.c, c.sid, ch, "u1")
		if _, err := c.c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []herald.ActivityKind{herald.Subscribed, herald.Unsubscribed, herald.ChannelOccupied, herald.ChannelVacated,
		herald.MemberAdded, herald.MemberRemoved, herald.SubscriptionCount}
	expectList(t, r, []string{
		"channel_occupied presence-act", "subscription_count presence-act 1",
		"member_added presence-act u1", "subscribed presence-act u1",
		"subscription_count presence-act 2", "subscribed presence-act u1",
	}, kinds...)

	if err := a.WriteJSON(map[string]any{"event": "client-hi", "channel": ch, "data": map[string]int{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "client_event", func() (bool, string) { return len(r.find(herald.ClientEvent)) == 1, "" })
	if ce := r.find(herald.ClientEvent)[0]; ce.Event != "client-hi" || ce.Channel != ch || ce.SocketID != sidA || ce.UserID != "u1" || ce.Data != `{"n":1}` {
		t.Fatalf("client_event %+v", ce)
	}
	if err := h.Publish("app-id", herald.Event{Name: "api", Channel: ch, Data: "d", SocketID: sidB}); err != nil {
		t.Fatal(err)
	}
	if ev := r.find(herald.APIEvent); len(ev) != 1 || ev[0].Event != "api" || ev[0].Data != "d" || ev[0].SocketID != sidB {
		t.Fatalf("api_event %+v", ev)
	}
	sendSubscribe(t, b, sidB, "cache-act", "")
	poll.Until(t, patience, "cache_miss", func() (bool, string) { return len(r.find(herald.CacheMiss)) == 1, "" })
	if cm := r.find(herald.CacheMiss)[0]; cm.Channel != "cache-act" || cm.SocketID != sidB {
		t.Fatalf("cache_miss %+v", cm)
	}

	a.Close() // u1 still has b: no member_removed
	poll.Until(t, patience, "connection_closed", func() (bool, string) { return len(r.find(herald.ConnectionClosed)) == 1, "" })
	if cl := r.find(herald.ConnectionClosed)[0]; cl.SocketID != sidA || cl.Code != 1006 {
		t.Fatalf("connection_closed %+v, want %s with 1006 (no close frame)", cl, sidA)
	}
	if err := b.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]string{"channel": ch}}); err != nil {
		t.Fatal(err)
	}
	expectList(t, r, []string{
		"channel_occupied presence-act", "subscription_count presence-act 1",
		"member_added presence-act u1", "subscribed presence-act u1",
		"subscription_count presence-act 2", "subscribed presence-act u1",
		"channel_occupied cache-act", "subscription_count cache-act 1", "subscribed cache-act",
		"unsubscribed presence-act u1", "subscription_count presence-act 1",
		"unsubscribed presence-act u1", "member_removed presence-act u1", "channel_vacated presence-act", "subscription_count presence-act 0",
	}, kinds...)
	if err := b.WriteFrame(true, 0x8, []byte{0x0f, 0xa0}); err != nil { // close 4000
		t.Fatal(err)
	}
	poll.Until(t, patience, "b's connection_closed", func() (bool, string) { return len(r.find(herald.ConnectionClosed)) == 2, "" })
	if cl := r.find(herald.ConnectionClosed)[1]; cl.SocketID != sidB || cl.Code != 4000 {
		t.Fatalf("connection_closed %+v, want %s with 4000", cl, sidB)
	}
}

// TestActivityWantsAndDetach: an observer hears only the kinds it wants, a refresh reads
// Wants again, and nothing reaches an observer after its detach.
func TestActivityWantsAndDetach(t *testing.T) {
	h, addr := startServer(t, session.Config{})
	r := &recorder{want: herald.Activities(herald.ChannelOccupied)}
	detach, err := h.Observe("app-id", r)
	if err != nil {
		t.Fatal(err)
	}
	nd := &node{h: h, addr: addr}
	join(t, nd, "one", "")
	expectList(t, r, []string{"channel_occupied one"})
	r.mu.Lock()
	r.want = herald.Activities(herald.ChannelOccupied, herald.APIEvent)
	r.mu.Unlock()
	h.RefreshObservers("app-id")
	if err := h.Publish("app-id", herald.Event{Name: "e", Channel: "one", Data: "d"}); err != nil {
		t.Fatal(err)
	}
	expectList(t, r, []string{"channel_occupied one", "api_event one"})
	detach()
	detach()
	join(t, nd, "two", "")
	if err := h.Publish("app-id", herald.Event{Name: "e", Channel: "two", Data: "d"}); err != nil {
		t.Fatal(err)
	}
	if got := r.list(); len(got) != 2 {
		t.Fatalf("after detach: %q", got)
	}
}

// channelKinds are the kinds that describe the cluster-wide state.
var channelKinds = []herald.ActivityKind{herald.ChannelOccupied, herald.ChannelVacated, herald.MemberAdded, herald.MemberRemoved}

// clusterRecorders observes every node of a cluster.
func clusterRecorders(t *testing.T, nodes []*node) []*recorder {
	rs := make([]*recorder, len(nodes))
	for i, nd := range nodes {
		rs[i] = observe(t, nd.h, herald.Activities(channelKinds...))
	}
	return rs
}

// all is what every recorder heard of the channel kinds, sorted (which node fired does not
// matter: how often does).
func all(rs []*recorder) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.list(channelKinds...)...)
	}
	slices.Sort(out)
	return out
}

// expectCluster waits until the cluster heard exactly want (sorted), failing on more.
func expectCluster(t *testing.T, rs []*recorder, want ...string) {
	t.Helper()
	slices.Sort(want)
	poll.Until(t, patience, strings.Join(want, "; "), func() (bool, string) {
		got := all(rs)
		if len(got) > len(want) {
			t.Fatalf("cluster activity %q, want %q", got, want)
		}
		return slices.Equal(got, want), fmt.Sprint(got)
	})
}

// settled waits until every node counts subs subscriptions of channel cluster-wide: every
// node's state has reached every other.
func settled(t *testing.T, nodes []*node, channel string, subs int) {
	t.Helper()
	for _, nd := range nodes {
		poll.Until(t, patience, fmt.Sprintf("%s counted %d on every node", channel, subs), func() (bool, string) {
			st, _ := nd.h.Channel("app-id", channel)
			return st.SubscriptionCount == subs, fmt.Sprint(st.SubscriptionCount)
		})
	}
}

// TestActivityClusterFiresOnce: in a cluster, occupied/vacated and member added/removed fire
// once for the cluster, when the cluster-wide state changes, whichever node has the sockets.
func TestActivityClusterFiresOnce(t *testing.T) {
	nodes := startClusterOn(t, memory.NewBus(), 2, session.Config{}, fastState, nil)
	rs := clusterRecorders(t, nodes)
	const ch = "presence-once"
	a, _ := joinPresence(t, nodes[0], ch, "u1")
	// Node 1 knows u1 before u1 joins there too; two first sockets within the state's
	// propagation delay would each be the user's first (docs/webhooks.md).
	usersOn(t, nodes[1], ch, "u1")
	b, _ := joinPresence(t, nodes[1], ch, "u1") // the same user on the other node
	c, _ := joinPresence(t, nodes[1], ch, "u2")
	settled(t, nodes, ch, 3)
	expectCluster(t, rs, "channel_occupied "+ch, "member_added "+ch+" u1", "member_added "+ch+" u2")
	a.Close() // u1 still on node 1
	settled(t, nodes, ch, 2)
	c.Close()
	settled(t, nodes, ch, 1)
	expectCluster(t, rs, "channel_occupied "+ch, "member_added "+ch+" u1", "member_added "+ch+" u2", "member_removed "+ch+" u2")
	b.Close()
	settled(t, nodes, ch, 0)
	expectCluster(t, rs, "channel_occupied "+ch, "member_added "+ch+" u1", "member_added "+ch+" u2", "member_removed "+ch+" u2",
		"member_removed "+ch+" u1", "channel_vacated "+ch)
	// The last to leave was node 1's: node 0 must have fired nothing of the leaves.
	if got := rs[0].list(herald.ChannelVacated, herald.MemberRemoved); len(got) != 0 {
		t.Fatalf("node 0 fired %q; the leaves were node 1's", got)
	}
}

// TestActivityClusterSimultaneousLeaves: two nodes' last subscribers leave while neither
// knows of the other's leave (the bus is down for both, as within the state's propagation
// delay): each thought the other still had the channel and fired nothing, as its record
// says, so the node with the lowest epoch fires channel_vacated and member_removed, once.
func TestActivityClusterSimultaneousLeaves(t *testing.T) {
	var gates []*gate
	// No node dies here whatever the test's pace: only the records tell of the leaves.
	sc := cluster.Config{Heartbeat: 50 * time.Millisecond, NodeTimeout: time.Hour}
	nodes := startClusterOn(t, memory.NewBus(), 2, session.Config{}, sc, func(b herald.Broker) herald.Broker {
		g := &gate{Broker: b}
		gates = append(gates, g)
		return g
	})
	rs := clusterRecorders(t, nodes)
	const ch = "presence-race"
	a, _ := joinPresence(t, nodes[0], ch, "u")
	usersOn(t, nodes[1], ch, "u") // else both joins are first (the documented race), each fires
	b, _ := joinPresence(t, nodes[1], ch, "u")
	settled(t, nodes, ch, 2)
	expectCluster(t, rs, "channel_occupied "+ch, "member_added "+ch+" u")
	for _, g := range gates {
		g.down.Store(true)
	}
	a.Close()
	b.Close()
	for _, nd := range nodes {
		poll.Until(t, patience, "the local leave", func() (bool, string) {
			return localGone(nd, ch), ""
		})
	}
	for _, g := range gates {
		g.down.Store(false)
	}
	settled(t, nodes, ch, 0)
	expectCluster(t, rs, "channel_occupied "+ch, "member_added "+ch+" u", "member_removed "+ch+" u", "channel_vacated "+ch)
}

// localGone reports whether nd has no local subscription to channel any more: its count is
// what the other node had when the bus went down (1).
func localGone(nd *node, channel string) bool {
	st, _ := nd.h.Channel("app-id", channel)
	return st.SubscriptionCount <= 1
}

// TestActivityClusterDeadNode: a node that dies with the last sockets of a channel and a
// user: one surviving node (the lowest live epoch) fires channel_vacated and member_removed.
func TestActivityClusterDeadNode(t *testing.T) {
	nodes := startClusterOn(t, memory.NewBus(), 3, session.Config{}, fastState, nil)
	rs := clusterRecorders(t, nodes)
	const ch = "presence-dead"
	joinPresence(t, nodes[2], ch, "gone")
	settled(t, nodes, ch, 1)
	for _, nd := range nodes[:2] {
		usersOn(t, nd, ch, "gone") // node 2's member record too, before it dies
	}
	expectCluster(t, rs, "channel_occupied "+ch, "member_added "+ch+" gone")
	_ = nodes[2].b.Close(context.Background()) // node 2 falls silent
	settled(t, nodes[:2], ch, 0)
	expectCluster(t, rs, "channel_occupied "+ch, "member_added "+ch+" gone", "member_removed "+ch+" gone", "channel_vacated "+ch)
}
