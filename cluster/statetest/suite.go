package statetest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
)

// Run runs every case of the contract against the clusters newCluster builds.
func Run(t *testing.T, newCluster NewCluster) {
	cases := []struct {
		name string
		fn   func(*testing.T, NewCluster)
	}{
		// One node.
		{"Channels", testChannels},
		{"Delivery", testDelivery},
		{"Exclusion", testExclusion},
		{"Batch", testBatch},
		{"Presence", testPresence},
		{"PresenceLimit", testPresenceLimit},
		{"Cache", testCache},
		// A cluster.
		{"CountsAcrossNodes", testCountsAcrossNodes},
		{"DeliveryAcrossNodes", testDeliveryAcrossNodes},
		{"PublishersOrder", testPublishersOrder},
		{"PresenceAcrossNodes", testPresenceAcrossNodes},
		{"PresenceLimitAcrossNodes", testPresenceLimitAcrossNodes},
		{"UsersAcrossNodes", testUsersAcrossNodes},
		{"CacheAcrossNodes", testCacheAcrossNodes},
		{"Terminate", testTerminate},
		{"NodeLeaves", testNodeLeaves},
		{"BundlesAcrossNodes", testBundlesAcrossNodes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newCluster) })
	}
}

// testChannels: Acquire counts subscriptions and says which is a channel's first, Release
// which is its last; Lookup, LocalSubs, Channel and Channels report them.
func testChannels(t *testing.T, nc NewCluster) {
	nd := start(t, nc, 1)[0]
	ch1, first := nd.st.Acquire(nd.app, "room", herald.Classify("room"))
	if !first || ch1.Name() != "room" || ch1.Info() != herald.Classify("room") {
		t.Fatalf("first Acquire: %q %+v first=%v; want room, its info, first", ch1.Name(), ch1.Info(), first)
	}
	ch2, first := nd.st.Acquire(nd.app, "room", herald.Classify("room"))
	if first || ch2 != ch1 {
		t.Fatalf("second Acquire: first=%v, same channel %v; want not first, the same channel", first, ch2 == ch1)
	}
	nd.subscribe(t, nd.connect(), "presence-lobby")
	if got := nd.app.Lookup("room"); got != ch1 {
		t.Fatalf("Lookup(room) = %p, want %p", got, ch1)
	}
	if got := nd.app.Lookup("nowhere"); got != nil {
		t.Fatalf("Lookup(nowhere) = %p, want nil", got)
	}
	if n := nd.app.LocalSubs("room"); n != 2 {
		t.Fatalf("LocalSubs(room) = %d, want 2", n)
	}
	if st, ok := nd.st.Channel(nd.app, "room"); !ok || st.SubscriptionCount != 2 {
		t.Fatalf("Channel(room) = %+v %v, want 2 subscriptions, occupied", st, ok)
	}
	if st, ok := nd.st.Channel(nd.app, "nowhere"); ok || st.SubscriptionCount != 0 {
		t.Fatalf("Channel(nowhere) = %+v %v, want nothing", st, ok)
	}
	stats := nd.st.Channels(nd.app, "")
	slices.SortFunc(stats, func(x, y herald.ChannelStat) int { return cmpString(x.Name, y.Name) })
	want := []herald.ChannelStat{{Name: "presence-lobby", SubscriptionCount: 1}, {Name: "room", SubscriptionCount: 2}}
	if !slices.Equal(stats, want) {
		t.Fatalf("Channels = %+v, want %+v", stats, want)
	}
	if got := nd.st.Channels(nd.app, "pres"); len(got) != 1 || got[0].Name != "presence-lobby" {
		t.Fatalf("Channels(pres) = %+v, want presence-lobby only", got)
	}
	if f := nd.app.Figures(); f.Channels != 2 || f.Subscriptions != 3 {
		t.Fatalf("Figures = %+v, want 2 channels, 3 subscriptions", f)
	}
	if last := nd.st.Release(nd.app, ch1); last {
		t.Fatal("Release of one of two subscriptions reported the last")
	}
	if last := nd.st.Release(nd.app, ch1); !last {
		t.Fatal("Release of the last subscription did not report it")
	}
	if nd.app.Lookup("room") != nil || nd.app.LocalSubs("room") != 0 {
		t.Fatal("a released channel is still there")
	}
	if n := nd.st.RemoteSubs(nd.app, "presence-lobby"); n != 0 {
		t.Fatalf("RemoteSubs on a lone node = %d, want 0", n)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testDelivery: a publish reaches every subscriber of its channel, in order, and nobody
// else; a channel without subscribers takes publishes too.
func testDelivery(t *testing.T, nc NewCluster) {
	nd := start(t, nc, 1)[0]
	a, b, other := nd.connect(), nd.connect(), nd.connect()
	nd.subscribe(t, a, "news")
	nd.subscribe(t, b, "news")
	nd.subscribe(t, other, "sport")
	nd.publish(t, "nobody", "x")
	var want []string
	for i := range 20 {
		nd.publish(t, "news", strconv.Itoa(i))
		want = append(want, "news:"+strconv.Itoa(i))
	}
	a.expect(t, "20 events on a", "news:", want...)
	b.expect(t, "20 events on b", "news:", want...)
	nd.publish(t, "sport", "end")
	other.expect(t, "the other channel's event", "sport:", "sport:end")
	if got := other.with("news:"); len(got) != 0 {
		t.Fatalf("a subscriber of another channel got %q", got)
	}
}

// testExclusion: a publish with a SocketID skips that connection; Forward skips its sender.
func testExclusion(t *testing.T, nc NewCluster) {
	nd := start(t, nc, 1)[0]
	a, b := nd.connect(), nd.connect()
	nd.subscribe(t, a, "private-room")
	nd.subscribe(t, b, "private-room")
	ev := herald.Event{Name: "e", Channel: "private-room", SocketID: a.c.ID()}
	if err := nd.st.Publish(nd.app, ev, []byte("private-room:not-a\n")); err != nil {
		t.Fatal(err)
	}
	nd.st.Forward(nd.app, "private-room", &b.c, []byte("private-room:from-b\n"))
	nd.publish(t, "private-room", "end")
	a.expect(t, "a's events", "private-room:", "private-room:from-b", "private-room:end")
	b.expect(t, "b's events", "private-room:", "private-room:not-a", "private-room:end")
}

// testBatch: PublishBatch delivers its events in order.
func testBatch(t *testing.T, nc NewCluster) {
	nd := start(t, nc, 1)[0]
	a := nd.connect()
	nd.subscribe(t, a, "x")
	nd.subscribe(t, a, "y")
	evs := []herald.Event{{Name: "e", Channel: "x"}, {Name: "e", Channel: "y"}, {Name: "e", Channel: "x"}}
	frames := [][]byte{[]byte("b:1\n"), []byte("b:2\n"), []byte("b:3\n")}
	if err := nd.st.PublishBatch(nd.app, evs, frames); err != nil {
		t.Fatal(err)
	}
	a.expect(t, "the batch, in order", "b:", "b:1", "b:2", "b:3")
}

// join joins cl to presence channel ch of nd as user, sending the member_added (to the
// others) and the joiner's confirmation as the session does; it reports Join's result and
// what f was told.
func join(nd *node, cl *client, ch chName, user string, max int) (ok, added bool, members []string) {
	c := nd.app.Lookup(string(ch))
	ok = nd.app.Join(c, herald.Member{UserID: user, Info: []byte(`{"n":"` + user + `"}`)}, max, func(add bool, ms []herald.Member) bool {
		added = add
		for _, m := range ms {
			members = append(members, m.UserID)
		}
		if add {
			nd.eng.Dispatch(&c.Channel, []byte("added:"+user+"\n"), cl.c.Num(), nil, noMeasure)
		}
		return false
	})
	return ok, added, members
}

type chName string

// leave leaves presence channel ch of nd as user; it reports what f was told (and whether it
// was called: only for the user's last connection here).
func leave(nd *node, cl *client, ch chName, user string) (called, removed bool) {
	c := nd.app.Lookup(string(ch))
	nd.app.Leave(c, user, func(rm bool) bool {
		called, removed = true, rm
		if rm {
			nd.eng.Dispatch(&c.Channel, []byte("removed:"+user+"\n"), cl.c.Num(), nil, noMeasure)
		}
		return false
	})
	return called, removed
}

// testPresence: a user counts once however many connections join as it; the first join
// adds it, its last leave removes it, and Users lists the members.
func testPresence(t *testing.T, nc NewCluster) {
	nd := start(t, nc, 1)[0]
	const ch = chName("presence-room")
	a, b, c := nd.connect(), nd.connect(), nd.connect()
	for _, cl := range []*client{a, b, c} {
		nd.subscribe(t, cl, string(ch))
	}
	if ok, added, ms := join(nd, a, ch, "u1", 10); !ok || !added || !slices.Equal(ms, []string{"u1"}) {
		t.Fatalf("u1 joins: ok %v added %v members %v; want ok, added, [u1]", ok, added, ms)
	}
	if ok, added, ms := join(nd, b, ch, "u2", 10); !ok || !added || !slices.Equal(ms, []string{"u1", "u2"}) {
		t.Fatalf("u2 joins: ok %v added %v members %v; want ok, added, [u1 u2]", ok, added, ms)
	}
	if ok, added, ms := join(nd, c, ch, "u1", 10); !ok || added || !slices.Equal(ms, []string{"u1", "u2"}) {
		t.Fatalf("u1 joins again: ok %v added %v members %v; want ok, not added, [u1 u2]", ok, added, ms)
	}
	if got := nd.app.Users(string(ch)); !slices.Equal(got, []string{"u1", "u2"}) {
		t.Fatalf("Users = %v, want [u1 u2]", got)
	}
	if st, _ := nd.st.Channel(nd.app, string(ch)); st.UserCount != 2 {
		t.Fatalf("Channel's UserCount = %d, want 2", st.UserCount)
	}
	if called, _ := leave(nd, a, ch, "u1"); called {
		t.Fatal("u1's first leave (another connection of u1 is in) called f")
	}
	if called, removed := leave(nd, c, ch, "u1"); !called || !removed {
		t.Fatalf("u1's last leave: called %v removed %v; want both", called, removed)
	}
	if got := nd.app.Users(string(ch)); !slices.Equal(got, []string{"u2"}) {
		t.Fatalf("Users after u1 left = %v, want [u2]", got)
	}
	a.expect(t, "a's member events", "added:", "added:u2")
	b.expect(t, "b's member events", "removed:", "removed:u1")
}

// testPresenceLimit: a full presence channel refuses a new member, and only a new one.
func testPresenceLimit(t *testing.T, nc NewCluster) {
	nd := start(t, nc, 1)[0]
	const ch = chName("presence-small")
	a, b, c := nd.connect(), nd.connect(), nd.connect()
	for _, cl := range []*client{a, b, c} {
		nd.subscribe(t, cl, string(ch))
	}
	join(nd, a, ch, "u1", 1)
	if ok, _, _ := join(nd, b, ch, "u2", 1); ok {
		t.Fatal("a second member joined a channel of at most 1")
	}
	if ok, _, _ := join(nd, c, ch, "u1", 1); !ok {
		t.Fatal("a member's second connection was refused by the limit")
	}
	if got := nd.app.Users(string(ch)); !slices.Equal(got, []string{"u1"}) {
		t.Fatalf("Users = %v, want [u1]", got)
	}
}

// testCache: a cache channel keeps its last event, with or without subscribers, and a
// subscriber entering under WithCache gets each event once.
func testCache(t *testing.T, nc NewCluster) {
	nd := start(t, nc, 1)[0]
	if nd.app.Cached("cache-prices") {
		t.Fatal("a cache channel holds an event before any publish")
	}
	nd.publish(t, "cache-prices", "1")
	poll.Until(t, Wait, "the cache to hold the event", func() (bool, string) { return nd.app.Cached("cache-prices"), "" })
	nd.publish(t, "cache-prices", "2")
	var last string
	poll.Until(t, Wait, "the second event as the last", func() (bool, string) {
		nd.app.WithCache("cache-prices", func(l []byte) { last = string(l) })
		return last == "cache-prices:2\n", fmt.Sprintf("%q", last)
	})
	cl := nd.connect()
	ch := nd.acquire(t, "cache-prices")
	nd.app.WithCache("cache-prices", func(l []byte) {
		nd.eng.Subscribe(&cl.c, &ch.Channel, []byte("sub:cache-prices\n"), []byte("replay:"+string(l)))
	})
	nd.publish(t, "cache-prices", "3")
	cl.expect(t, "the replay, then the live event", "", "sub:cache-prices", "replay:cache-prices:2", "cache-prices:3")
}

// testCountsAcrossNodes: every node counts the subscriptions of every other, as they come
// and go.
func testCountsAcrossNodes(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 3)
	subs := map[int]int{0: 2, 1: 1}
	type joined struct {
		cl *client
		ch *cluster.Channel
	}
	var onZero []joined
	for i, n := range subs {
		for range n {
			cl := nodes[i].connect()
			ch := nodes[i].subscribe(t, cl, "counted")
			if i == 0 {
				onZero = append(onZero, joined{cl, ch})
			}
		}
	}
	for i, nd := range nodes {
		poll.Until(t, Wait, "node "+strconv.Itoa(i)+"'s counts", func() (bool, string) {
			st, ok := nd.st.Channel(nd.app, "counted")
			remote := nd.st.RemoteSubs(nd.app, "counted")
			list := nd.st.Channels(nd.app, "count")
			return ok && st.SubscriptionCount == 3 && remote == 3-subs[i] && len(list) == 1 && list[0].SubscriptionCount == 3,
				fmt.Sprintf("Channel %+v %v, remote %d, Channels %+v", st, ok, remote, list)
		})
	}
	poll.Until(t, Wait, "node 2 told of the count changes", func() (bool, string) {
		nodes[2].l.mu.Lock()
		defer nodes[2].l.mu.Unlock()
		return nodes[2].l.counts["counted"] > 0, ""
	})
	for _, j := range onZero {
		nodes[0].unsubscribe(j.cl, j.ch)
	}
	for i, nd := range nodes {
		want := map[int]int{0: 1, 1: 0, 2: 1}[i] // the others' count: node 1's subscription
		poll.Until(t, Wait, "node "+strconv.Itoa(i)+" counting node 0's leaves", func() (bool, string) {
			st, ok := nd.st.Channel(nd.app, "counted")
			remote := nd.st.RemoteSubs(nd.app, "counted")
			return ok && st.SubscriptionCount == 1 && remote == want, fmt.Sprintf("Channel %+v %v, remote %d", st, ok, remote)
		})
	}
}

// testDeliveryAcrossNodes: once a subscriber's gate is open, what any node publishes reaches
// it, and only the nodes with subscribers.
func testDeliveryAcrossNodes(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 3)
	a, b := nodes[0].connect(), nodes[1].connect()
	nodes[0].subscribe(t, a, "wide")
	nodes[1].subscribe(t, b, "wide")
	for i, nd := range nodes {
		nd.publish(t, "wide", "from-"+strconv.Itoa(i))
	}
	for _, cl := range []*client{a, b} {
		poll.Until(t, Wait, "three events", func() (bool, string) {
			got := cl.with("wide:")
			slices.Sort(got)
			return slices.Equal(got, []string{"wide:from-0", "wide:from-1", "wide:from-2"}), fmt.Sprint(got)
		})
	}
}

// testPublishersOrder: events that several nodes publish concurrently to one channel reach
// every subscriber, on every node, each node's in the order it published them. (Whether all
// subscribers see one order across publishers is the bus's: one Redis or NATS server gives
// it, the memory bus does not.)
func testPublishersOrder(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 3)
	var cls []*client
	for _, nd := range nodes {
		cl := nd.connect()
		nd.subscribe(t, cl, "ordered")
		cls = append(cls, cl)
	}
	const each = 50
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if err := nd.st.Publish(nd.app, herald.Event{Name: "e", Channel: "ordered"}, []byte("ordered:"+strconv.Itoa(i)+"-"+strconv.Itoa(j)+"\n")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for k, cl := range cls {
		poll.Until(t, Wait, "every event", func() (bool, string) {
			n := len(cl.with("ordered:"))
			return n == each*len(nodes), fmt.Sprint(n)
		})
		next := make([]int, len(nodes))
		for _, l := range cl.with("ordered:") {
			from, seq, _ := strings.Cut(strings.TrimPrefix(l, "ordered:"), "-")
			i, _ := strconv.Atoi(from)
			if seq != strconv.Itoa(next[i]) {
				t.Fatalf("node %d's subscriber got node %d's events out of order: %q where %d was next", k, i, l, next[i])
			}
			next[i]++
		}
	}
}

// testPresenceAcrossNodes: a user is a member once in the cluster, however many nodes it
// joined on; the others' subscribers are told of its first join and its last leave anywhere.
func testPresenceAcrossNodes(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 2)
	const ch = chName("presence-wide")
	for i, nd := range nodes { // a member on each node, as every presence subscriber is
		w := nd.connect()
		nd.subscribe(t, w, string(ch))
		join(nd, w, ch, "w"+strconv.Itoa(i), 10)
	}
	for _, nd := range nodes { // each learns of the other from its snapshot or member_added
		poll.Until(t, Wait, nd.id+" lists both watchers", func() (bool, string) {
			got := nd.app.Users(string(ch))
			return slices.Equal(got, []string{"w0", "w1"}), fmt.Sprint(got)
		})
	}
	// u1 joins node 0, then (once node 1 knows) node 1; it leaves node 1, then node 0. Each
	// node's subscribers must be told once that u1 came and once that it went: by the node's
	// own join or leave (the flag Join and Leave give f) or by the other node's (Listener),
	// whichever the node learns first.
	a, b := nodes[0].connect(), nodes[1].connect()
	nodes[0].subscribe(t, a, string(ch))
	nodes[1].subscribe(t, b, string(ch))
	var added, removed [2]int
	count := func(i int, ok bool, n *[2]int) {
		if ok {
			n[i]++
		}
	}
	_, ok, _ := join(nodes[0], a, ch, "u1", 10)
	count(0, ok, &added)
	if !ok {
		t.Fatal("u1's first join anywhere was not an addition")
	}
	nodes[1].l.expect(t, "node 1 told of u1", "added presence-wide u1", "added presence-wide u1")
	for _, nd := range nodes {
		poll.Until(t, Wait, nd.id+" lists everyone", func() (bool, string) {
			got := nd.app.Users(string(ch))
			return slices.Equal(got, []string{"u1", "w0", "w1"}), fmt.Sprint(got)
		})
	}
	_, ok, ms := join(nodes[1], b, ch, "u1", 10)
	count(1, ok, &added)
	if ok || !slices.Equal(ms, []string{"u1", "w0", "w1"}) {
		t.Fatalf("u1 joining a second node: added %v, members %v; want not added, [u1 w0 w1]", ok, ms)
	}
	if _, ok := leave(nodes[1], b, ch, "u1"); ok {
		t.Fatal("u1 left node 1, is still on node 0, and node 1 knew: removed all the same")
	}
	_, ok = leave(nodes[0], a, ch, "u1")
	count(0, ok, &removed)
	for i, nd := range nodes {
		poll.Until(t, Wait, nd.id+" told once of u1's arrival and once of its departure", func() (bool, string) {
			in := added[i] + len(nd.l.seen("added presence-wide u1"))
			out := removed[i] + len(nd.l.seen("removed presence-wide u1"))
			users := nd.app.Users(string(ch))
			return in == 1 && out == 1 && slices.Equal(users, []string{"w0", "w1"}),
				fmt.Sprintf("arrivals %d, departures %d, members %v", in, out, users)
		})
	}
}

// testPresenceLimitAcrossNodes: the member limit counts the members of every node.
func testPresenceLimitAcrossNodes(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 2)
	const ch = chName("presence-small")
	a, b, c := nodes[0].connect(), nodes[1].connect(), nodes[1].connect()
	nodes[0].subscribe(t, a, string(ch))
	join(nodes[0], a, ch, "u1", 1)
	nodes[1].subscribe(t, b, string(ch))
	nodes[1].subscribe(t, c, string(ch))
	poll.Until(t, Wait, "node 1 to know u1", func() (bool, string) {
		got := nodes[1].app.Users(string(ch))
		return slices.Equal(got, []string{"u1"}), fmt.Sprint(got)
	})
	if ok, _, _ := join(nodes[1], b, ch, "u2", 1); ok {
		t.Fatal("a second member joined on node 1 a channel of at most 1 that has one on node 0")
	}
	if ok, _, _ := join(nodes[1], c, ch, "u1", 1); !ok {
		t.Fatal("u1 (a member on node 0) was refused on node 1")
	}
}

// testUsersAcrossNodes: the other nodes learn of a user's first sign-in and last sign-out.
func testUsersAcrossNodes(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 3)
	nodes[0].st.SignedIn(nodes[0].app, "alice", true)
	for _, nd := range nodes[1:] {
		nd.l.expect(t, nd.id+" told alice signed in", "user ", "user alice true")
	}
	nodes[0].st.SignedIn(nodes[0].app, "alice", false)
	for _, nd := range nodes[1:] {
		nd.l.expect(t, nd.id+" told alice signed out", "user ", "user alice true", "user alice false")
	}
	if got := nodes[0].l.seen("user "); len(got) != 0 {
		t.Fatalf("node 0 was told of its own user: %q", got)
	}
}

// testCacheAcrossNodes: every node keeps a cache channel's last event, whichever published
// it, and a node that starts later learns the others'.
func testCacheAcrossNodes(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 2)
	nodes[0].publish(t, "cache-ticker", "1")
	for _, nd := range nodes {
		poll.Until(t, Wait, nd.id+" keeps the event", func() (bool, string) {
			var last string
			nd.app.WithCache("cache-ticker", func(l []byte) { last = string(l) })
			return last == "cache-ticker:1\n", fmt.Sprintf("%q", last)
		})
	}
	late := startMore(t, nc, 2, 1)[0]
	poll.Until(t, Wait, "a node that joins later to learn the event", func() (bool, string) {
		var last string
		late.app.WithCache("cache-ticker", func(l []byte) { last = string(l) })
		return last == "cache-ticker:1\n", fmt.Sprintf("%q", last)
	})
}

// testTerminate: Terminate asks every other node to close the user's connections.
func testTerminate(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 3)
	nodes[1].st.Terminate(nodes[1].app, "mallory")
	for _, i := range []int{0, 2} {
		nodes[i].l.expect(t, nodes[i].id+" told to close mallory's connections", "terminate ", "terminate mallory")
	}
}

// testNodeLeaves: a node that stops takes its share with it: its members leave (the others'
// subscribers are told), its subscriptions are no longer counted.
func testNodeLeaves(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 2)
	const ch = chName("presence-leaving")
	a, b := nodes[0].connect(), nodes[1].connect()
	nodes[0].subscribe(t, a, string(ch))
	join(nodes[0], a, ch, "stayer", 10)
	nodes[1].subscribe(t, b, string(ch))
	join(nodes[1], b, ch, "goner", 10)
	nodes[0].l.expect(t, "node 0 told of goner", "added ", "added presence-leaving goner")
	poll.Until(t, Wait, "node 0 counting node 1's subscription", func() (bool, string) {
		n := nodes[0].st.RemoteSubs(nodes[0].app, string(ch))
		return n == 1, fmt.Sprint(n)
	})
	nodes[1].st.Stop(t.Context())
	nodes[0].l.expect(t, "node 0 told goner left with its node", "removed ", "removed presence-leaving goner")
	poll.Until(t, Wait, "node 1's share gone", func() (bool, string) {
		n := nodes[0].st.RemoteSubs(nodes[0].app, string(ch))
		users := nodes[0].app.Users(string(ch))
		return n == 0 && slices.Equal(users, []string{"stayer"}), fmt.Sprint(n, users)
	})
}
