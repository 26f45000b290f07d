package session_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// TestClusterKeyedRetryOnAnotherNode: on a channel without history, an event published on one
// node and published again with its idempotency key on another (a publisher's retry after a
// lost answer, an ingest source's hand-off again) reaches every subscriber once, in order:
// the nodes read keys off the bus (wire version 5) and drop a key they received.
func TestClusterKeyedRetryOnAnotherNode(t *testing.T) {
	bus := memory.NewBus()
	var nodes []*node
	var states []*cluster.Replicated
	for i := range 3 {
		nd := &node{}
		mux := new(broker.Mux)
		mb := bus.Attach(memory.Config{NodeID: "node-" + strconv.Itoa(i)}, mux.Receive)
		t.Cleanup(func() { _ = mb.Close(context.Background()) })
		nd.b = mb
		nd.h, nd.addr = serveNode(t, session.Config{}, func(eng *fanout.Engine) cluster.State {
			r := cluster.NewReplicated(cluster.Config{Heartbeat: 50 * time.Millisecond}, eng, mb, memory.NewHistory(mb), mux.Handle, nil)
			states = append(states, r)
			return r
		}, app)
		nodes = append(nodes, nd)
	}
	for _, r := range states {
		poll.Until(t, patience, "every node to read keys", func() (bool, string) {
			return r.Features()&cluster.FeatureKeys != 0 && len(r.Nodes()) == 3, strings.Join(r.Features().Names(), ",")
		})
	}
	var clients []*wstest.Client
	for _, nd := range nodes[:2] {
		c, _ := join(t, nd, "orders", "")
		clients = append(clients, c)
	}
	var want []string
	for i := range 100 {
		ev := herald.Event{Name: "e", Channel: "orders", Data: strconv.Itoa(i), Key: "k-" + strconv.Itoa(i)}
		want = append(want, ev.Data)
		if err := nodes[i%3].h.Publish("app-id", ev); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 { // and again through the next node, as a retry
			if err := nodes[(i+1)%3].h.Publish("app-id", ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range clients {
		expectEvents(t, c, "e", want)
	}
	for _, c := range clients {
		expectSilence(t, c, nodes[0], "orders", "e") // and nothing twice
	}
}
