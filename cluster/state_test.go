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
	buses := perTest[*memory.Bus]{}
	statetest.Run(t, replicated(func(t testing.TB, c broker.Common, h herald.BusHandler) (herald.Broker, error) {
		return buses.of(t, memory.NewBus).Attach(memory.Config{NodeID: c.NodeID}, h), nil
	}))
}

func TestReplicatedConformanceNATS(t *testing.T) {
	srv := servicetest.NATS(t)
	statetest.Run(t, replicated(func(_ testing.TB, c broker.Common, h herald.BusHandler) (herald.Broker, error) {
		return nats.New(nats.Config{URL: srv.URL(), Common: c}, h)
	}))
}

func TestReplicatedConformanceRedis(t *testing.T) {
	srv := servicetest.Redis(t)
	statetest.Run(t, replicated(func(_ testing.TB, c broker.Common, h herald.BusHandler) (herald.Broker, error) {
		return redis.New(redis.Config{URL: srv.URL(), Common: c}, h)
	}))
}

// replicated builds a Replicated state for each node, on the broker attach connects for it
// (routing through a mux). The nodes of one test share a bus prefix of their own, so that the
// nodes a test adds later join its cluster and no other test's.
func replicated(attach func(t testing.TB, c broker.Common, h herald.BusHandler) (herald.Broker, error)) statetest.NewCluster {
	prefixes := perTest[string]{}
	return func(t testing.TB, nodes []statetest.Node) []cluster.State {
		prefix := prefixes.of(t, func() string { return "state" + strconv.FormatInt(time.Now().UnixNano(), 36) })
		var out []cluster.State
		for _, n := range nodes {
			mux := new(broker.Mux)
			b, err := attach(t, broker.Common{NodeID: n.ID, Prefix: prefix}, mux.Receive)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			out = append(out, cluster.NewReplicated(fast, n.Engine, b, nil, mux.Handle, nil))
		}
		return out
	}
}

// perTest keeps one value for each test running now, made by the first call of that test.
type perTest[T any] struct {
	mu sync.Mutex
	m  map[testing.TB]T
}

func (p *perTest[T]) of(t testing.TB, newValue func() T) T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.m[t]; ok {
		return v
	}
	if p.m == nil {
		p.m = map[testing.TB]T{}
	}
	v := newValue()
	p.m[t] = v
	t.Cleanup(func() {
		p.mu.Lock()
		delete(p.m, t)
		p.mu.Unlock()
	})
	return v
}
