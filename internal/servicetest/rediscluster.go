package servicetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// RedisShards starts n standalone redis-servers and returns them with the cluster.url that
// lists them all as shards.
func RedisShards(t testing.TB, n int) ([]*Server, string) {
	t.Helper()
	var srvs []*Server
	var urls []string
	for range n {
		s := Redis(t)
		srvs = append(srvs, s)
		urls = append(urls, s.URL())
	}
	return srvs, strings.Join(urls, ",")
}

// redisArgs are the arguments of a loopback redis-server without persistence.
func redisArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning"}
}

// redisServer starts a redis-server with args (redisArgs and extra's, or with whole, whole's
// alone) on a free loopback port.
func redisServer(t testing.TB, extra, whole func(port int, dir string) []string) *Server {
	t.Helper()
	s := Redis(t)
	s.proc.kill()
	s.args = func(port int, dir string) []string {
		if whole != nil {
			return whole(port, dir)
		}
		return append(redisArgs(port, dir), extra(port, dir)...)
	}
	s.Start(t)
	return s
}

// RedisClusterSet is a Redis Cluster of three masters without replicas, every slot assigned.
type RedisClusterSet struct {
	Nodes []*Server
}

// URL is the cluster's address in the form herald's cluster.url takes.
func (c *RedisClusterSet) URL() string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr())
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// RedisCluster starts three redis-servers in cluster mode (each with its own cluster bus port),
// gives each a third of the slots, introduces them (CLUSTER MEET) and returns once every node
// reports the cluster ok.
func RedisCluster(t testing.TB) *RedisClusterSet {
	t.Helper()
	c := &RedisClusterSet{}
	var busPorts []int
	for range 3 {
		busPort := freePort(t)
		busPorts = append(busPorts, busPort)
		c.Nodes = append(c.Nodes, redisServer(t, func(port int, dir string) []string {
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes-"+strconv.Itoa(port)+".conf"),
				"--cluster-port", strconv.Itoa(busPort), "--cluster-node-timeout", "2000"}
		}, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), Ready)
	defer cancel()
	per := 16384 / len(c.Nodes)
	for i, n := range c.Nodes {
		first, last := i*per, (i+1)*per-1
		if i == len(c.Nodes)-1 {
			last = 16383
		}
		do(t, ctx, n.Addr(), "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last))
	}
	for i, n := range c.Nodes[1:] {
		do(t, ctx, c.Nodes[0].Addr(), "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.Port), strconv.Itoa(busPorts[i+1]))
	}
	for _, n := range c.Nodes {
		for {
			info := do(t, ctx, n.Addr(), "CLUSTER", "INFO")
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("Redis Cluster not ok within %v: %s", Ready, info)
			}
			time.Sleep(50 * time.Millisecond) // polling interval while the cluster forms
		}
	}
	return c
}

// do runs one command on the server at addr and returns its answer as text (arrays joined
// by spaces); it fails the test on an error.
func do(t testing.TB, ctx context.Context, addr string, args ...string) string {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true, AlwaysRESP2: true})
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	defer c.Close()
	res := c.Do(ctx, c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
	if err := res.Error(); err != nil {
		t.Fatalf("%s: %s: %v", addr, strings.Join(args, " "), err)
	}
	if s, err := res.ToString(); err == nil {
		return s
	}
	arr, _ := res.ToArray()
	var parts []string
	for _, m := range arr {
		s, _ := m.ToString()
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// RedisSentinelSet is a primary, its replica and three sentinels watching them under the
// master name "mymaster" (down after 1 s, failover within 5 s).
type RedisSentinelSet struct {
	Primary, Replica *Server
	Sentinels        []*Server
}

// MasterName is the name the sentinels know the primary by.
const MasterName = "mymaster"

// URL is the set's address in the form herald's cluster.url takes.
func (s *RedisSentinelSet) URL() string {
	var addrs []string
	for _, n := range s.Sentinels {
		addrs = append(addrs, n.Addr())
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + MasterName
}

// CurrentPrimary asks the first sentinel that answers which address is the primary now.
func (s *RedisSentinelSet) CurrentPrimary(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range s.Sentinels {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{n.Addr()}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			continue
		}
		arr, err := c.Do(ctx, c.B().Arbitrary("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName).Build()).AsStrSlice()
		c.Close()
		if err == nil && len(arr) == 2 {
			return arr[0] + ":" + arr[1]
		}
	}
	return ""
}

// RedisSentinel starts a primary, a replica of it and three sentinels, and returns once the
// replica is in sync and every sentinel knows the replica and the other sentinels.
func RedisSentinel(t testing.TB) *RedisSentinelSet {
	t.Helper()
	set := &RedisSentinelSet{Primary: Redis(t)}
	set.Replica = redisServer(t, func(int, string) []string {
		return []string{"--replicaof", "127.0.0.1", strconv.Itoa(set.Primary.Port)}
	}, nil)
	for range 3 {
		set.Sentinels = append(set.Sentinels, redisServer(t, nil, func(port int, dir string) []string {
			conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", port))
			if _, err := os.Stat(conf); err != nil { // a restart keeps what the sentinel learnt
				body := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
					"sentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %s 1000\n"+
					"sentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
					port, dir, MasterName, set.Primary.Port, MasterName, MasterName, MasterName)
				_ = os.WriteFile(conf, []byte(body), 0o600) // if it fails, the sentinel says so in its log
			}
			return []string{conf, "--sentinel"}
		}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), Ready)
	defer cancel()
	for {
		info := do(t, ctx, set.Replica.Addr(), "INFO", "replication")
		ok := strings.Contains(info, "master_link_status:up")
		for _, s := range set.Sentinels {
			m := do(t, ctx, s.Addr(), "SENTINEL", "MASTER", MasterName)
			ok = ok && fieldIs(m, "num-slaves", "1") && fieldIs(m, "num-other-sentinels", "2")
		}
		if ok {
			return set
		}
		if ctx.Err() != nil {
			t.Fatalf("sentinel set not ready within %v", Ready)
		}
		time.Sleep(100 * time.Millisecond) // polling interval while the sentinels discover each other
	}
}

// fieldIs reports whether the flat "name value name value" answer has name's value v.
func fieldIs(flat, name, v string) bool {
	f := strings.Fields(flat)
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == name {
			return f[i+1] == v
		}
	}
	return false
}
