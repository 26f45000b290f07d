package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/historytest"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/redis/rueidis"
)

// servers stops and starts a set of servers together, as one bus.
func servers(srvs []*servicetest.Server) (stop, start func(testing.TB)) {
	return func(t testing.TB) {
			for _, s := range srvs {
				s.Stop(t)
			}
		}, func(t testing.TB) {
			for _, s := range srvs {
				s.Start(t)
			}
		}
}

// newURLCluster builds brokers on url, the bus servers srvs. Its Start returns once every
// broker has every shard back: a broker's Connected follows the shard of the internal keys
// alone, and the suite's outage case checks it as soon as the channels it uses deliver
// again, which the reconnect of another shard (its own backoff) may trail.
func newURLCluster(url string, srvs []*servicetest.Server, auth broker.AuthConfig) brokertest.NewCluster {
	return func(t testing.TB, nodes []brokertest.Node) brokertest.Cluster {
		stop, start := servers(srvs)
		var brokers []*redis.Broker
		c := brokertest.Cluster{Stop: stop, Start: func(t testing.TB) {
			start(t)
			poll.Until(t, brokertest.Wait, "every shard back", func() (bool, string) {
				for _, b := range brokers {
					for _, s := range b.Shards() {
						if !s.Connected {
							return false, s.ID + " down"
						}
					}
				}
				return true, ""
			})
		}}
		prefix := clusters.Add(1)
		for _, n := range nodes {
			b, err := redis.New(redis.Config{URL: url, Common: broker.Common{NodeID: n.ID,
				Prefix: "test." + strconv.FormatInt(prefix, 10), RoundTrip: n.RoundTrip, Auth: auth, QueueSize: n.QueueSize}}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			brokers = append(brokers, b)
			c.Brokers = append(c.Brokers, b)
		}
		return c
	}
}

// newURLHistoryCluster is newURLCluster with a History beside each broker; lose flushes the
// servers.
func newURLHistoryCluster(url string, srvs []*servicetest.Server, auth broker.AuthConfig) historytest.NewCluster {
	return func(t testing.TB, nodes []historytest.Node) historytest.Cluster {
		stop, start := servers(srvs)
		c := historytest.Cluster{Ordered: true, Stop: stop, Start: start, Lose: func(t testing.TB) {
			for _, s := range srvs {
				admin(t, s, "FLUSHALL")
			}
		}}
		prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
		var brokers []*redis.Broker
		for _, n := range nodes {
			b, err := redis.New(redis.Config{URL: url, Common: broker.Common{NodeID: n.ID, Prefix: prefix, Auth: auth}}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			brokers = append(brokers, b)
			c.Brokers = append(c.Brokers, b)
			c.Histories = append(c.Histories, redis.NewHistory(b))
		}
		c.Reopen = func(_ testing.TB, i int) herald.History { return redis.NewHistory(brokers[i]) }
		return c
	}
}

// TestConformanceShards: the contract holds on three standalone servers as shards.
func TestConformanceShards(t *testing.T) {
	srvs, url := servicetest.RedisShards(t, 3)
	brokertest.Run(t, newURLCluster(url, srvs, broker.AuthConfig{}))
}

// TestConformanceShardsSecret: and with messages sealed (one Auth for every shard: one
// sequence per node, whichever shard carries a message).
func TestConformanceShardsSecret(t *testing.T) {
	srvs, url := servicetest.RedisShards(t, 3)
	brokertest.Run(t, newURLCluster(url, srvs, broker.AuthConfig{Secret: testSecret}))
}

func TestHistoryConformanceShards(t *testing.T) {
	srvs, url := servicetest.RedisShards(t, 3)
	historytest.Run(t, newURLHistoryCluster(url, srvs, broker.AuthConfig{}))
}

func TestHistoryConformanceShardsSecret(t *testing.T) {
	srvs, url := servicetest.RedisShards(t, 3)
	historytest.Run(t, newURLHistoryCluster(url, srvs, broker.AuthConfig{Secret: testSecret}))
}

// TestShardsSpread: channels are spread over every shard, each channel's messages and
// history keys on the one shard that Rendezvous names.
func TestShardsSpread(t *testing.T) {
	srvs, url := servicetest.RedisShards(t, 3)
	b, err := redis.New(redis.Config{URL: url, Common: broker.Common{NodeID: "n0", Prefix: "spread"}}, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	h := redis.NewHistory(b)
	ids := []string{}
	for _, s := range srvs {
		ids = append(ids, s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), brokertest.Wait)
	defer cancel()
	per := make([]int, len(srvs))
	for i := range 30 {
		ch := "ch" + strconv.Itoa(i)
		if _, err := h.Publish(ctx, herald.HistoryRule{Size: 10, TTL: 60e9}, herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: ch, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		want := redis.Rendezvous(ids, "a", ch)
		per[want]++
		for j, s := range srvs {
			n := keyCount(t, s, "spread.history.{a."+ch+"}.*")
			if (j == want) != (n == 2) {
				t.Fatalf("channel %s: %d keys on shard %d; Rendezvous says shard %d", ch, n, j, want)
			}
		}
	}
	for j, n := range per {
		if n == 0 {
			t.Errorf("shard %d holds none of 30 channels: %v", j, per)
		}
	}
}

func keyCount(t *testing.T, s *servicetest.Server, pattern string) int {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys, err := c.Do(context.Background(), c.B().Keys().Pattern(pattern).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// TestRendezvousMovesFew: adding a fourth shard moves about a quarter of the channels, all to
// the new shard.
func TestRendezvousMovesFew(t *testing.T) {
	three := []string{"a:1", "b:1", "c:1"}
	four := []string{"c:1", "a:1", "d:1", "b:1"} // order does not matter
	moved := 0
	const n = 10000
	for i := range n {
		ch := "ch" + strconv.Itoa(i)
		before, after := three[redis.Rendezvous(three, "app", ch)], four[redis.Rendezvous(four, "app", ch)]
		if before != after {
			if after != "d:1" {
				t.Fatalf("%s moved from %s to %s, not to the new shard", ch, before, after)
			}
			moved++
		}
	}
	if moved < n/5 || moved > n*3/10 {
		t.Errorf("%d of %d channels moved; want about a quarter", moved, n)
	}
}

// TestShardDown: with one shard down, the channels of the other shards keep delivering; the
// down shard's channels fail at once with CodeUnavailable, Shards says which, and when the
// shard comes back its channels are subscribed again and deliver.
func TestShardDown(t *testing.T) {
	srvs, url := servicetest.RedisShards(t, 3)
	ids := []string{}
	for _, s := range srvs {
		ids = append(ids, s.Addr())
	}
	var mu sync.Mutex
	got := map[string]int{}
	recv := func(m herald.BusMessage) { mu.Lock(); got[m.Channel]++; mu.Unlock() }
	count := func(ch string) int { mu.Lock(); defer mu.Unlock(); return got[ch] }
	cfg := redis.Config{URL: url, Common: broker.Common{NodeID: "n0", Prefix: "down"}}
	b, err := redis.New(cfg, recv)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	internal := redis.Rendezvous(ids, "", "state")
	down := (internal + 1) % 3 // not the internal keys' shard: the bus stays Connected
	// One channel on each shard.
	chans := make([]string, 3)
	for i := 0; chans[0] == "" || chans[1] == "" || chans[2] == ""; i++ {
		ch := "ch" + strconv.Itoa(i)
		if j := redis.Rendezvous(ids, "app", ch); chans[j] == "" {
			chans[j] = ch
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), brokertest.Wait)
	defer cancel()
	for _, ch := range chans {
		if err := b.Subscribe(ctx, "app", ch); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(ch string) error {
		return b.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: ch, Payload: []byte("x")})
	}
	srvs[down].Stop(t)
	poll.Until(t, brokertest.Wait, "the shard to be reported down", func() (bool, string) {
		st := b.Shards()
		return !st[down].Connected && st[internal].Connected, fmt.Sprintf("%+v", st)
	})
	if !b.Connected() {
		t.Fatal("the bus reports not connected while only a channel shard is down")
	}
	for j, ch := range chans {
		err := publish(ch)
		if j == down {
			if herald.CodeOf(err) != herald.CodeUnavailable {
				t.Fatalf("publish on the down shard: %v, want CodeUnavailable", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("publish on shard %d: %v", j, err)
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush with only live shards pending: %v", err)
	}
	for j, ch := range chans {
		if j == down {
			continue
		}
		poll.Until(t, brokertest.Wait, "delivery on a live shard", func() (bool, string) {
			return count(ch) == 1, fmt.Sprintf("%s: %d", ch, count(ch))
		})
	}
	srvs[down].Start(t)
	poll.Until(t, brokertest.Wait, "the shard to come back, its channel delivering", func() (bool, string) {
		if !b.Shards()[down].Connected {
			return false, "down"
		}
		_ = publish(chans[down])
		_ = b.Flush(ctx)
		return count(chans[down]) > 0, "nothing received"
	})
	if b.Stats().Reconnects == 0 {
		t.Error("no reconnect counted")
	}
}

// TestConformanceCluster: the contract holds on a 3-master Redis Cluster, sharded pub/sub.
func TestConformanceCluster(t *testing.T) {
	c := servicetest.RedisCluster(t)
	brokertest.Run(t, newURLCluster(c.URL(), c.Nodes, broker.AuthConfig{}))
}

func TestHistoryConformanceCluster(t *testing.T) {
	c := servicetest.RedisCluster(t)
	historytest.Run(t, newURLHistoryCluster(c.URL(), c.Nodes, broker.AuthConfig{}))
}

func TestHistoryConformanceClusterSecret(t *testing.T) {
	c := servicetest.RedisCluster(t)
	historytest.Run(t, newURLHistoryCluster(c.URL(), c.Nodes, broker.AuthConfig{Secret: testSecret}))
}

// TestClusterSlotMoved: when the hash slot of a channel's group moves to another node of the
// Redis Cluster (which ends the slot's sharded subscriptions), the group's connection
// subscribes again on the new owner and the channel delivers again.
func TestClusterSlotMoved(t *testing.T) {
	c := servicetest.RedisCluster(t)
	var got atomic.Int64
	cfg := redis.Config{URL: c.URL(), Common: broker.Common{NodeID: "n0", Prefix: "moved"}}
	a, err := redis.New(cfg, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	cfg.NodeID = "n1"
	b, err := redis.New(cfg, func(herald.BusMessage) { got.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), brokertest.Wait)
	defer cancel()
	if err := b.Subscribe(ctx, "app", "ch"); err != nil {
		t.Fatal(err)
	}
	g := redis.ClusterGroup("app", "ch")
	slot := adminInt(t, c.Nodes[0], "CLUSTER", "KEYSLOT", "{moved."+strconv.Itoa(g)+"}group")
	from := int(slot) / (16384 / 3)
	if from > 2 {
		from = 2
	}
	to := (from + 1) % 3
	ids := make([]string, 3)
	for i, n := range c.Nodes {
		ids[i] = adminString(t, n, "CLUSTER", "MYID")
	}
	s := strconv.FormatInt(slot, 10)
	adminString(t, c.Nodes[to], "CLUSTER", "SETSLOT", s, "IMPORTING", ids[from])
	adminString(t, c.Nodes[from], "CLUSTER", "SETSLOT", s, "MIGRATING", ids[to])
	for _, i := range []int{to, from, 3 - to - from} {
		adminString(t, c.Nodes[i], "CLUSTER", "SETSLOT", s, "NODE", ids[to])
	}
	t.Logf("slot %d of group %d moved from node %d to node %d", slot, g, from, to)
	poll.Until(t, brokertest.Wait, "the group to subscribe again and deliver", func() (bool, string) {
		n := got.Load()
		_ = a.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: []byte("x")})
		_ = a.Flush(ctx)
		return b.Shards()[g].Reconnects > 0 && got.Load() > n, fmt.Sprintf("%+v", b.Shards()[g])
	})
}

// admin runs a command on server s itself (not routed elsewhere, even in a Redis Cluster).
func admin(t testing.TB, s *servicetest.Server, args ...string) rueidis.RedisResult {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := c.Do(context.Background(), c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
	if err := res.Error(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return res
}

func adminString(t *testing.T, s *servicetest.Server, args ...string) string {
	t.Helper()
	v, _ := admin(t, s, args...).ToString()
	return v
}

func adminInt(t *testing.T, s *servicetest.Server, args ...string) int64 {
	t.Helper()
	v, err := admin(t, s, args...).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
