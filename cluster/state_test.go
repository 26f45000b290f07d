package cluster_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/cluster/statetest"
	"github.com/herald-rt/herald/internal/servicetest"
)

// fast is a cluster whose nodes announce themselves every 50 ms and are dead after 1 s of
// silence.
var fast = cluster.Config{Heartbeat: 50 * time.Millisecond, NodeTimeout: time.Second}

func TestLocalConformance(t *testing.T) {
	statetest.Run(t, func(t testing.TB, nodes []statetest.Node) []cluster.State {
		if len(nodes) > 1 {
			t.Skip("a single node has no other nodes")
		}
		return []cluster.State{cluster.NewLocal(fast, nodes[0].Engine)}
	})
}

func TestReplicatedConformance(t *testing.T) {
	statetest.Run(t, func(t testing.TB, nodes []statetest.Node) []cluster.State {
		return replicated(t, nodes, func(id string, h herald.BusHandler) herald.Broker {
			return memoryBus(t).Attach(memory.Config{NodeID: id}, h)
		})
	})
}

// buses are the memory buses of the tests running now, one per test: a test that asks for
// more nodes later gets them on the same bus.
var (
	busesMu sync.Mutex
	buses   = map[testing.TB]*memory.Bus{}
)

func memoryBus(t testing.TB) *memory.Bus {
	busesMu.Lock()
	defer busesMu.Unlock()
	b := buses[t]
	if b == nil {
		b = memory.NewBus()
		buses[t] = b
		t.Cleanup(func() {
			busesMu.Lock()
			delete(buses, t)
			busesMu.Unlock()
		})
	}
	return b
}

// replicated builds a Replicated state for each node, each on the broker attach returns for
// it (routing through a mux).
func replicated(t testing.TB, nodes []statetest.Node, attach func(id string, h herald.BusHandler) herald.Broker) []cluster.State {
	var out []cluster.State
	for _, n := range nodes {
		mux := new(broker.Mux)
		b := attach(n.ID, mux.Receive)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		out = append(out, cluster.NewReplicated(fast, n.Engine, b, mux.Handle, nil))
	}
	return out
}

func TestReplicatedConformanceNATS(t *testing.T) {
	srv := servicetest.NATS(t)
	statetest.Run(t, func(t testing.TB, nodes []statetest.Node) []cluster.State {
		prefix := prefixOf(t)
		return replicated(t, nodes, func(id string, h herald.BusHandler) herald.Broker {
			b, err := nats.New(nats.Config{URL: srv.URL(), Common: broker.Common{NodeID: id, Prefix: prefix}}, h)
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	})
}

func TestReplicatedConformanceRedis(t *testing.T) {
	srv := servicetest.Redis(t)
	statetest.Run(t, func(t testing.TB, nodes []statetest.Node) []cluster.State {
		prefix := prefixOf(t)
		return replicated(t, nodes, func(id string, h herald.BusHandler) herald.Broker {
			b, err := redis.New(redis.Config{URL: srv.URL(), Common: broker.Common{NodeID: id, Prefix: prefix}}, h)
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	})
}

// prefixOf is the bus prefix of the test's cluster: each test has subjects of its own on the
// shared server, and the nodes a test adds later join its cluster.
func prefixOf(t testing.TB) string {
	busesMu.Lock()
	defer busesMu.Unlock()
	p, ok := prefixes[t]
	if !ok {
		p = "state" + strconv.Itoa(len(prefixes)) + "x" + strconv.FormatInt(time.Now().UnixNano(), 36)
		prefixes[t] = p
		t.Cleanup(func() {
			busesMu.Lock()
			delete(prefixes, t)
			busesMu.Unlock()
		})
	}
	return p
}

var prefixes = map[testing.TB]string{}
