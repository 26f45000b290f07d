package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// fastState is a cluster whose nodes announce themselves every 50 ms and are dead after
// 500 ms of silence.
var fastState = cluster.Config{Heartbeat: 50 * time.Millisecond, NodeTimeout: 500 * time.Millisecond}

// members returns the ids of a presence subscription_succeeded.
func members(t *testing.T, m wstest.Message) []string {
	t.Helper()
	var d struct {
		Presence struct{ IDs []string }
	}
	if err := json.Unmarshal([]byte(m.DataString()), &d); err != nil {
		t.Fatalf("subscription_succeeded data %s: %v", m.Data, err)
	}
	slices.Sort(d.Presence.IDs)
	return d.Presence.IDs
}

// joinPresence connects to nd and joins channel as user; it returns the client and the
// member ids its subscription_succeeded listed.
func joinPresence(t *testing.T, nd *node, channel, user string) (*wstest.Client, []string) {
	t.Helper()
	c, sid := dial(t, nd)
	sendSubscribe(t, c, sid, channel, user)
	m, err := c.Expect("pusher_internal:subscription_succeeded", patience)
	if err != nil {
		t.Fatal(err)
	}
	return c, members(t, m)
}

// usersOn polls nd until its member list of channel is want.
func usersOn(t *testing.T, nd *node, channel string, want ...string) {
	t.Helper()
	slices.Sort(want)
	poll.Until(t, patience, fmt.Sprintf("members %v", want), func() (bool, string) {
		got := nd.h.Users("app-id", channel)
		st, _ := nd.h.Channel("app-id", channel)
		return slices.Equal(got, want) && st.UserCount == len(want), fmt.Sprint(got, " user_count ", st.UserCount)
	})
}

// expectMember reads until a member_added or member_removed and checks it is ev for user.
func expectMember(t *testing.T, c *wstest.Client, ev, user string) {
	t.Helper()
	for {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatalf("waiting for %s %s: %v", ev, user, err)
		}
		switch m.Event {
		case "pusher_internal:member_added", "pusher_internal:member_removed":
			var d struct {
				UserID string `json:"user_id"`
			}
			_ = json.Unmarshal([]byte(m.DataString()), &d)
			if m.Event != ev || d.UserID != user {
				t.Fatalf("got %s %s; want %s %s", m.Event, d.UserID, ev, user)
			}
			return
		}
	}
}

// noMemberEvents checks, with a marker published through nd, that c got no presence event.
func noMemberEvents(t *testing.T, c *wstest.Client, nd *node, channel string) {
	t.Helper()
	expectSilence(t, c, nd, channel, "pusher_internal:member_added", "pusher_internal:member_removed")
}

func TestStatePresenceAcrossNodes(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	const ch = "presence-room"
	alice, ids := joinPresence(t, nodes[0], ch, "alice")
	if !slices.Equal(ids, []string{"alice"}) {
		t.Fatalf("alice's snapshot %v", ids)
	}
	usersOn(t, nodes[1], ch, "alice")
	bob, ids := joinPresence(t, nodes[1], ch, "bob")
	if !slices.Equal(ids, []string{"alice", "bob"}) {
		t.Fatalf("bob's snapshot on node 1: %v; want alice and bob", ids)
	}
	expectMember(t, alice, "pusher_internal:member_added", "bob")
	// bob again, on node 2: one member, no member_added for anyone.
	usersOn(t, nodes[2], ch, "alice", "bob")
	bob2, ids := joinPresence(t, nodes[2], ch, "bob")
	if !slices.Equal(ids, []string{"alice", "bob"}) {
		t.Fatalf("bob's second snapshot on node 2: %v", ids)
	}
	for _, nd := range nodes {
		usersOn(t, nd, ch, "alice", "bob")
		// Polled: the member list can be complete (bob is a member through node 1) before
		// bob's second subscription has reached this node's counts.
		poll.Until(t, patience, "3 subscriptions on every node", func() (bool, string) {
			st, ok := nd.h.Channel("app-id", ch)
			return ok && st.SubscriptionCount == 3, fmt.Sprintf("%+v %v", st, ok)
		})
	}
	noMemberEvents(t, alice, nodes[0], ch)
	// bob leaves node 1 but is still on node 2: no member_removed.
	bob.Close()
	poll.Until(t, patience, "bob's node-1 socket to leave every count", func() (bool, string) {
		st, _ := nodes[0].h.Channel("app-id", ch)
		return st.SubscriptionCount == 2, fmt.Sprint(st.SubscriptionCount)
	})
	noMemberEvents(t, alice, nodes[0], ch)
	bob2.Close()
	expectMember(t, alice, "pusher_internal:member_removed", "bob")
	for _, nd := range nodes {
		usersOn(t, nd, ch, "alice")
	}
	alice.Close()
	for _, nd := range nodes {
		poll.Until(t, patience, "no channel anywhere", func() (bool, string) {
			list := nd.h.Channels("app-id", "")
			return len(list) == 0, fmt.Sprint(list)
		})
	}
}

func TestStateCountsAcrossNodes(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	for i := range 6 {
		join(t, nodes[i%3], "counted-"+strconv.Itoa(i%2), "")
	}
	for _, nd := range nodes {
		poll.Until(t, patience, "cluster-wide counts", func() (bool, string) {
			list := nd.h.Channels("app-id", "counted-")
			slices.SortFunc(list, func(a, b herald.ChannelStat) int { return strings.Compare(a.Name, b.Name) })
			ok := len(list) == 2 && list[0].SubscriptionCount == 3 && list[1].SubscriptionCount == 3
			return ok, fmt.Sprintf("%+v", list)
		})
		if st, ok := nd.h.Channel("app-id", "counted-1"); !ok || st.SubscriptionCount != 3 {
			t.Fatalf("counted-1: %+v %v", st, ok)
		}
	}
}

func TestStatePresenceLimitClusterWide(t *testing.T) {
	small := *app
	small.Limits.MaxPresenceMembers = 2
	bus := memory.NewBus()
	var nodes []*node
	for i := range 2 {
		nodes = append(nodes, startNode(t, bus, strconv.Itoa(i), session.Config{}, cluster.Config{}, nil, &small))
	}
	const ch = "presence-small"
	joinPresence(t, nodes[0], ch, "u1")
	joinPresence(t, nodes[1], ch, "u2")
	usersOn(t, nodes[0], ch, "u1", "u2")
	c, sid := dial(t, nodes[0])
	sendSubscribe(t, c, sid, ch, "u3")
	if m, err := c.Expect("pusher:subscription_error", patience); err != nil || !strings.Contains(m.DataString(), "4100") {
		t.Fatalf("third member: %+v %v; want subscription_error 4100", m, err)
	}
	// A member already present elsewhere is not a new one: u2 may join on node 0.
	if _, ids := joinPresence(t, nodes[0], ch, "u2"); !slices.Equal(ids, []string{"u1", "u2"}) {
		t.Fatalf("u2's second socket: %v", ids)
	}
}

func TestStateTerminateOnEveryNode(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	var clients []*wstest.Client
	for _, nd := range nodes {
		c, sid := dial(t, nd)
		ud := `{"id":"carol"}`
		if err := c.WriteJSON(map[string]any{"event": "pusher:signin", "data": map[string]string{
			"user_data": ud, "auth": app.Key + ":" + pusher.Sign(app.Secret, sid+"::user::"+ud)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher:signin_success", patience); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	nodes[0].h.TerminateUser("app-id", "carol")
	for i, c := range clients {
		code, err := c.ExpectClose(patience)
		if err != nil || code != 4009 {
			t.Fatalf("carol on node %d: close %d, %v; want 4009", i, code, err)
		}
	}
}

func TestStateCacheAcrossNodes(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	if err := nodes[0].h.Publish("app-id", herald.Event{Name: "price", Channel: "cache-btc", Data: "42"}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "node 1 to keep the event", func() (bool, string) {
		return nodes[1].h.Cached("app-id", "cache-btc"), "not cached"
	})
	c, sid := dial(t, nodes[1])
	sendSubscribe(t, c, sid, "cache-btc", "")
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, c, "price", []string{"42"})
	// Nothing published anywhere: a cache miss.
	sendSubscribe(t, c, sid, "cache-none", "")
	if _, err := c.Expect("pusher:cache_miss", patience); err != nil {
		t.Fatal(err)
	}
	// A presence cache channel holds its members like any presence channel, and lets go.
	p, _ := joinPresence(t, nodes[0], "presence-cache-room", "dora")
	usersOn(t, nodes[1], "presence-cache-room", "dora")
	p.Close()
	c.Close()
	for _, nd := range nodes {
		usersOn(t, nd, "presence-cache-room")
		poll.Until(t, patience, "no channel left", func() (bool, string) {
			list := nd.h.Channels("app-id", "")
			return len(list) == 0 && nd.h.Stats().Channels == 0, fmt.Sprint(list)
		})
	}
}

// TestStateDeadNodeLeaves: a node that stops talking (its bus connection closed under it,
// as a kill -9 leaves it) is dropped after the timeout: one member_removed for each of its
// members that no live node has, nothing for a member that has a socket elsewhere, and it
// leaves every count. A node that comes back under the same id is not counted twice.
func TestStateDeadNodeLeaves(t *testing.T) {
	bus := memory.NewBus()
	nodes := startClusterOn(t, bus, 3, session.Config{}, fastState, nil)
	const ch = "presence-live"
	watcher, _ := joinPresence(t, nodes[0], ch, "watcher")
	joinPresence(t, nodes[2], ch, "gone")
	joinPresence(t, nodes[2], ch, "both")
	joinPresence(t, nodes[1], ch, "both")
	usersOn(t, nodes[0], ch, "watcher", "gone", "both")
	expectMember(t, watcher, "pusher_internal:member_added", "gone")
	expectMember(t, watcher, "pusher_internal:member_added", "both")
	start := time.Now()
	_ = nodes[2].b.Close(context.Background()) // node 2 falls silent
	expectMember(t, watcher, "pusher_internal:member_removed", "gone")
	t.Logf("member_removed %v after node 2 fell silent (timeout %v)", time.Since(start).Round(time.Millisecond), fastState.NodeTimeout)
	noMemberEvents(t, watcher, nodes[0], ch)
	for _, nd := range nodes[:2] {
		usersOn(t, nd, ch, "watcher", "both")
		poll.Until(t, patience, "node 2's sockets out of the count", func() (bool, string) {
			st, _ := nd.h.Channel("app-id", ch)
			return st.SubscriptionCount == 2, fmt.Sprint(st.SubscriptionCount)
		})
	}
	// A new node under the same id: counted once.
	back := startNode(t, bus, "node-2", session.Config{}, fastState, nil, app)
	joinPresence(t, back, ch, "gone")
	expectMember(t, watcher, "pusher_internal:member_added", "gone")
	for _, nd := range []*node{nodes[0], nodes[1], back} {
		usersOn(t, nd, ch, "watcher", "gone", "both")
		poll.Until(t, patience, "three subscriptions", func() (bool, string) {
			st, _ := nd.h.Channel("app-id", ch)
			return st.SubscriptionCount == 3, fmt.Sprint(st.SubscriptionCount)
		})
	}
}

// TestStateNewNodeLearnsEverything: a node that joins a running cluster gets every other
// node's share (their snapshots) and their cache channels' last events, so its answers are
// the cluster's at once.
func TestStateNewNodeLearnsEverything(t *testing.T) {
	bus := memory.NewBus()
	nodes := startClusterOn(t, bus, 2, session.Config{}, fastState, nil)
	joinPresence(t, nodes[0], "presence-early", "a")
	joinPresence(t, nodes[1], "presence-early", "b")
	join(t, nodes[1], "plain", "")
	if err := nodes[0].h.Publish("app-id", herald.Event{Name: "last", Channel: "cache-early", Data: "before"}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "node 1 to keep the cache event", func() (bool, string) {
		return nodes[1].h.Cached("app-id", "cache-early"), "not cached"
	})
	late := startClusterOn(t, bus, 1, session.Config{}, fastState, nil)[0]
	// The others' cache channels too: a subscriber on the late node gets the event published
	// before it started, not a cache miss.
	poll.Until(t, patience, "the late node to learn the cache event", func() (bool, string) {
		return late.h.Cached("app-id", "cache-early"), "not cached"
	})
	c, sid := dial(t, late)
	sendSubscribe(t, c, sid, "cache-early", "")
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, c, "last", []string{"before"})
	usersOn(t, late, "presence-early", "a", "b")
	poll.Until(t, patience, "the late node's counts", func() (bool, string) {
		st, ok := late.h.Channel("app-id", "plain")
		return ok && st.SubscriptionCount == 1, fmt.Sprint(st)
	})
}

// TestStateGoodbye: a node that shuts down tells the others, which drop its share at once
// (the timeout here is an hour: only the goodbye can explain the drop).
func TestStateGoodbye(t *testing.T) {
	nodes := startClusterOn(t, memory.NewBus(), 2, session.Config{}, cluster.Config{Heartbeat: 50 * time.Millisecond, NodeTimeout: time.Hour}, nil)
	watcher, _ := joinPresence(t, nodes[0], "presence-bye", "stays")
	joinPresence(t, nodes[1], "presence-bye", "leaves")
	expectMember(t, watcher, "pusher_internal:member_added", "leaves")
	join(t, nodes[1], "plain-bye", "")
	poll.Until(t, patience, "node 1's channel counted on node 0", func() (bool, string) {
		_, ok := nodes[0].h.Channel("app-id", "plain-bye")
		return ok, "not occupied"
	})
	if err := nodes[1].h.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	expectMember(t, watcher, "pusher_internal:member_removed", "leaves")
	poll.Until(t, patience, "node 1's share gone from node 0", func() (bool, string) {
		list := nodes[0].h.Channels("app-id", "")
		return len(list) == 1 && list[0].Name == "presence-bye" && list[0].SubscriptionCount == 1, fmt.Sprint(list)
	})
}
