package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/pusher"
)

// redisTopology is a Redis bus past one server that a test runs herald nodes on.
type redisTopology struct {
	name   string
	url    string
	shards []*servicetest.Server // the standalone shards; nil on a Redis Cluster
	groups int                   // shards (or a cluster's groups) /health lists
}

// eachRedisTopology runs f on three standalone shards and on a 3-master Redis Cluster.
func eachRedisTopology(t *testing.T, f func(t *testing.T, topo redisTopology)) {
	if testing.Short() {
		t.Skip("-short: runs redis-servers and herald nodes")
	}
	t.Run("shards", func(t *testing.T) {
		srvs, url := servicetest.RedisShards(t, 3)
		f(t, redisTopology{name: "shards", url: url, shards: srvs, groups: 3})
	})
	t.Run("cluster", func(t *testing.T) {
		c := servicetest.RedisCluster(t)
		f(t, redisTopology{name: "cluster", url: c.URL(), groups: redis.ClusterSlots})
	})
}

// shardHealth is /health's cluster part with its shards.
type shardHealth struct {
	Status  string
	Cluster struct {
		Connected bool
		Mode      string
		Shards    []struct {
			ID        string
			Connected bool
		}
	}
}

func (n *node) shardHealth(t *testing.T) shardHealth {
	t.Helper()
	var h shardHealth
	_, body, err := n.detail(t)
	if err == nil {
		_ = json.Unmarshal(body, &h)
	}
	return h
}

// TestClusterRedisTopologies runs three `herald serve` nodes on Redis past one server (three
// shards; a Redis Cluster): events on channels spread over every shard reach subscribers on
// other nodes; presence members and subscription counts agree on every node; each
// channel_occupied, member_added, member_removed and channel_vacated webhook is posted once
// for the cluster; /health lists the shards.
func TestClusterRedisTopologies(t *testing.T) {
	eachRedisTopology(t, func(t *testing.T, topo redisTopology) {
		hooks := newHookReceiver(t, map[string]string{restApp.Key: restApp.Secret})
		config := filepath.Join(t.TempDir(), "herald.yaml")
		app := fmt.Sprintf("apps:\n  - {id: %s, key: %s, secret: %s, enable_client_messages: true, webhooks: [{url: '%s', "+
			"event_types: [channel_occupied, channel_vacated, member_added, member_removed]}]}\n", restApp.ID, restApp.Key, restApp.Secret, hooks.srv.URL)
		if err := os.WriteFile(config, []byte(app), 0o600); err != nil {
			t.Fatal(err)
		}
		var nodes []*node
		for _, name := range []string{"node-a", "node-b", "node-c"} {
			n := startNode(t, name, topo.url, "--config", config, "--cluster-heartbeat", stateHeartbeat.String(),
				"--cluster-node-timeout", stateNodeTimeout.String(), "--webhooks-leave-delay", "0", "--webhooks-batch-interval", "20ms")
			n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "redis", true) })
			nodes = append(nodes, n)
		}
		a, b, c := nodes[0], nodes[1], nodes[2]
		if h := a.shardHealth(t); len(h.Cluster.Shards) != topo.groups {
			t.Errorf("/health lists %d shards, want %d: %+v", len(h.Cluster.Shards), topo.groups, h.Cluster)
		}

		// Events: twelve channels, spread over the shards, each from one node to another.
		for i := range 12 {
			ch := fmt.Sprintf("news-%d", i)
			sub := subscribe(t, nodes[(i+1)%3], ch)
			deliver(t, nodes[i%3], sub, ch)
		}

		// Presence: one member per node; every node agrees, each member_added posted once.
		const room = "presence-room"
		users := joinInTurn(t, nodes, room)
		u1, u2, u3 := users[0], users[1], users[2]
		u1.wait(t, "member_added u3", memberEvent("member_added", room, "u3"))
		subscribeInTurn(t, nodes, "counted", a, b, c, c)
		waitOccupancy(t, nodes, restApp, "counted", occupancy{subs: 4})

		u2.close()
		waitOccupancy(t, nodes, restApp, room, occupancy{2, []string{"u1", "u3"}})
		u1.close()
		waitOccupancy(t, nodes, restApp, room, occupancy{1, []string{"u3"}}) // the last leave is then one node's
		u3.close()
		waitOccupancy(t, nodes, restApp, room, occupancy{0, []string{}})

		key := restApp.Key + " " + room + " "
		poll.Until(t, clusterWait, "the room's webhooks", func() (bool, string) {
			return hooks.count(key+"channel_vacated") > 0 && hooks.count(key+"member_removed") >= 3, strings.Join(hooks.all(), "\n")
		})
		// Late duplicates would come within a heartbeat or two: the marker below waits for
		// a webhook posted after them.
		subscribe(t, b, "marker")
		poll.Until(t, clusterWait, "the marker's channel_occupied", func() (bool, string) {
			return hooks.count(restApp.Key+" marker channel_occupied") > 0, ""
		})
		t.Logf("%d webhook events posted", len(hooks.all()))
		for _, e := range []string{"channel_occupied", "channel_vacated"} {
			if n := hooks.count(key + e); n != 1 {
				t.Errorf("%s posted %d times, want once for the cluster:\n%s", e, n, strings.Join(hooks.all(), "\n"))
			}
		}
		for _, e := range []string{"member_added", "member_removed"} {
			if n := hooks.count(key + e); n != 3 {
				t.Errorf("%s posted %d times, want 3 (once per user):\n%s", e, n, strings.Join(hooks.all(), "\n"))
			}
		}
		for i := range 12 {
			if n := hooks.count(fmt.Sprintf("%s news-%d channel_occupied", restApp.Key, i)); n != 1 {
				t.Errorf("news-%d: channel_occupied posted %d times, want once", i, n)
			}
		}
	})
}

// TestClusterRedisShardDown: three herald nodes on three shards; one shard (not the one of
// the internal keys) is killed: the channels on the other shards keep delivering across
// nodes, a publish on a channel of the dead shard is refused with 503, /health says which
// shard is down, and when it comes back its channels deliver again.
func TestClusterRedisShardDown(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs redis-servers and herald nodes")
	}
	srvs, url := servicetest.RedisShards(t, 3)
	var ids []string
	for _, s := range srvs {
		ids = append(ids, s.Addr())
	}
	internal := redis.Rendezvous(ids, "", "state")
	down := (internal + 1) % 3
	// A channel on each shard.
	chans := make([]string, 3)
	for i := 0; slices.Contains(chans, ""); i++ {
		ch := fmt.Sprintf("ch-%d", i)
		if j := redis.Rendezvous(ids, restApp.ID, ch); chans[j] == "" {
			chans[j] = ch
		}
	}
	a := startNode(t, "node-a", url)
	b := startNode(t, "node-b", url)
	for _, n := range []*node{a, b} {
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "redis", true) })
	}
	subs := make([]*subscriber, 3)
	for j, ch := range chans {
		subs[j] = subscribe(t, b, ch)
		deliver(t, a, subs[j], ch)
	}
	srvs[down].Stop(t)
	poll.Until(t, clusterWait, "node-a's /health to show the shard down", func() (bool, string) {
		h := a.shardHealth(t)
		return len(h.Cluster.Shards) == 3 && !h.Cluster.Shards[down].Connected && h.Cluster.Connected, fmt.Sprintf("%+v", h)
	})
	for j, ch := range chans {
		if j == down {
			continue
		}
		deliver(t, a, subs[j], ch)
	}
	if status, _, body := a.publish(t, chans[down], "to the dead shard"); status != http.StatusServiceUnavailable {
		t.Errorf("publish on a channel of the dead shard: %d %s, want 503", status, body)
	}
	if m := a.scrape(); !strings.Contains(m, "herald_bus_shards_connected 2") || !strings.Contains(m, "herald_bus_shards 3") {
		t.Errorf("metrics do not show 2 of 3 shards connected")
	}
	srvs[down].Start(t)
	started := time.Now()
	deliver(t, a, subs[down], chans[down])
	t.Logf("the shard's channel delivered again %v after the shard answered", time.Since(started).Round(time.Millisecond))
}

// count is how many times event ("key channel name") was posted.
func (r *hookReceiver) count(event string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, g := range r.got {
		if g == event {
			n++
		}
	}
	return n
}

func (r *hookReceiver) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestIngestRedisOnShards: ingest keeps at least once into channels on a sharded bus. Two
// nodes on three shards read one Redis stream in one consumer group while entries are added
// without pause; node-a is killed with SIGKILL and node-b claims what it left pending: every
// entry reaches a subscriber on node-b.
func TestIngestRedisOnShards(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs redis-servers and herald nodes")
	}
	_, bus := servicetest.RedisShards(t, 3)
	_, c, cfgPath := redisIngest(t, "      claim_idle: 1s\n")
	a := startNode(t, "node-a", bus, "--config", cfgPath)
	b := startNode(t, "node-b", bus, "--config", cfgPath)
	for _, n := range []*node{a, b} {
		waitIngestUp(t, n, "the source up")
	}
	sub := watchTrades(t, b, "auction-1")
	var mu sync.Mutex
	seq := 0
	add := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		cmds := make(rueidis.Commands, 0, n)
		for range n {
			cmds = append(cmds, c.B().Xadd().Key("bids").Id("*").FieldValue().FieldValue("item_id", "1").FieldValue("seq", strconv.Itoa(seq)).Build())
			seq++
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
		defer cancel()
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Errorf("XADD: %v", err)
			}
		}
	}
	added := func() int { mu.Lock(); defer mu.Unlock(); return seq }
	stop := keepProducing(func() { add(5) })
	sub.waitAll(t, 300)
	a.kill(t)
	sub.waitAll(t, added()+100)
	stop()
	total := added()
	sub.waitAll(t, total)
	sub.mu.Lock()
	dups := len(sub.seqs) - total
	sub.mu.Unlock()
	t.Logf("auction-1 on node-b over three shards: %d entries added, all delivered, %d duplicates", total, dups)
}

// TestClusterRedisSentinelFailover: two herald nodes on a primary found through three
// sentinels, under a steady load of REST publishes on node-a to a subscriber on node-b; the
// primary is killed with SIGKILL, the sentinels promote the replica, and the nodes deliver
// again within 10 s of the promotion. The test logs the gap the subscriber saw.
func TestClusterRedisSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs redis-servers, sentinels and herald nodes")
	}
	set := servicetest.RedisSentinel(t)
	a := startNode(t, "node-a", set.URL())
	b := startNode(t, "node-b", set.URL())
	for _, n := range []*node{a, b} {
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "redis", true) })
	}
	sub := subscribe(t, b, "load")
	deliver(t, a, sub, "load")
	var mu sync.Mutex
	var got []time.Time // when each "load" event reached the subscriber
	go func() {
		for m := range sub.msgs {
			if m.Event == "tick" {
				mu.Lock()
				got = append(got, time.Now())
				mu.Unlock()
			}
		}
	}()
	received := func() (int, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return 0, time.Time{}
		}
		return len(got), got[len(got)-1]
	}
	refused := 0
	stop := keepProducing(func() {
		if a.tryPublish("load", "x") != http.StatusOK {
			mu.Lock()
			refused++
			mu.Unlock()
		}
	})
	defer stop()
	poll.Until(t, clusterWait, "the load to flow", func() (bool, string) { n, _ := received(); return n > 20, strconv.Itoa(n) })
	_, lastBefore := received()
	killed := time.Now()
	set.Primary.Stop(t)
	var promoted time.Time
	poll.Until(t, clusterWait, "the sentinels to promote the replica", func() (bool, string) {
		p := set.CurrentPrimary(t)
		promoted = time.Now()
		return p == set.Replica.Addr(), "primary " + p
	})
	var firstAfter time.Time
	poll.Until(t, 10*time.Second, "delivery again within 10 s of the promotion", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, at := range got {
			if at.After(promoted) {
				firstAfter = at
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d received, none since the promotion", len(got))
	})
	for _, n := range []*node{a, b} {
		n.waitHealth(t, "connected after the failover", func(h nodeHealth) error { return h.want("ok", "redis", true) })
	}
	mu.Lock()
	t.Logf("sentinel failover: promotion seen %v after the kill; first delivery %v after the promotion; "+
		"the subscriber's gap %v (last event before the kill to the first after); %d publishes refused (503) meanwhile",
		promoted.Sub(killed).Round(time.Millisecond), firstAfter.Sub(promoted).Round(time.Millisecond),
		firstAfter.Sub(lastBefore).Round(time.Millisecond), refused)
	mu.Unlock()
}

// tryPublish is publish for a goroutine other than the test's: it returns the status, 0 when
// the node did not answer.
func (n *node) tryPublish(channel, data string) int {
	path := "/apps/" + restApp.ID + "/events"
	body, _ := json.Marshal(map[string]string{"name": "tick", "channel": channel, "data": data})
	q := pusher.SignRequest(restApp, "POST", path, nil, body, time.Now())
	resp, err := n.client.Post("http://"+n.api+path+"?"+q.Encode(), "application/json", strings.NewReader(string(body)))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// joinInTurn joins u1, u2, ... to room, user i on nodes[i-1], each once every node agrees on
// the ones before: the state is eventually consistent (within a heartbeat), so first joins on
// two nodes within its delay would both post channel_occupied (docs/webhooks.md), and a
// member's snapshot lists only the members its node has heard of. It checks the last one's
// snapshot lists them all.
func joinInTurn(t *testing.T, nodes []*node, room string) []*peer {
	t.Helper()
	var users []*peer
	var names []string
	for i, n := range nodes {
		u := connectPeer(t, n, restApp, "u"+strconv.Itoa(i+1))
		names = append(names, "u"+strconv.Itoa(i+1))
		if got := u.join(t, room); i == len(nodes)-1 && !slices.Equal(got, names) {
			t.Fatalf("%s's subscription_succeeded lists %v, want %v", names[i], got, names)
		}
		waitOccupancy(t, nodes, restApp, room, occupancy{len(names), slices.Clone(names)})
		users = append(users, u)
	}
	return users
}

// subscribeInTurn subscribes to channel on each of on, in order; every node knows the first
// subscription before the others come (see joinInTurn).
func subscribeInTurn(t *testing.T, nodes []*node, channel string, on ...*node) {
	t.Helper()
	for i, n := range on {
		subscribe(t, n, channel)
		if i == 0 {
			waitOccupancy(t, nodes, restApp, channel, occupancy{subs: 1})
		}
	}
}
