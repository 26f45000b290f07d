package session_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/session"
)

// TestHistoryChurnLoadsOnce: one connection subscribing to a history channel and leaving it
// again and again makes its node load the channel's history from the bus's store once; every
// subscription still recovers what was published since its position, from the copy the node
// kept up to date while nobody here was subscribed. On the memory bus, Redis and NATS.
func TestHistoryChurnLoadsOnce(t *testing.T) {
	t.Run("memory", func(t *testing.T) { churnLoadsOnce(t, memoryEngine(memory.NewBus())) })
	for name, en := range realEngines(t) {
		t.Run(name, func(t *testing.T) { churnLoadsOnce(t, en) })
	}
}

func churnLoadsOnce(t *testing.T, en engine) {
	churny := *historyApp // not held back by the subscription rate
	churny.Limits.MaxSubscriptionsPerSecond = 100_000
	nd, _ := startEngineNode(t, en, "node-0", func(herald.BusMessage) bool { return false }, &churny)
	other, _ := startEngineNode(t, en, "node-1", func(herald.BusMessage) bool { return false }, &churny)
	c, _ := dial(t, nd)
	pos := herald.Position{}
	for i := 1; i <= 100; i++ {
		events, positions, rec := subscribeRecover(t, c, "auction-churn", &pos)
		if !*rec.Recovered || len(events) > 1 {
			t.Fatalf("subscription %d: replayed %v, %+v; want at most the event published since, recovered", i, events, rec)
		}
		if i > 1 && len(events) == 0 { // not here yet when it subscribed: it comes live
			m, err := c.Expect("pusher_internal:position", patience)
			if err != nil {
				t.Fatal(err)
			}
			positions = append(positions, decodePosition(t, m))
			if m, err = c.Expect("bid", patience); err != nil {
				t.Fatal(err)
			}
			events = append(events, m.DataString())
		}
		if i > 1 && (events[0] != strconv.Itoa(i-1) || positions[0].Offset != pos.Offset+1) {
			t.Fatalf("subscription %d: got %v at %+v; want the event published since, %d, at %d", i, events, positions, i-1, pos.Offset+1)
		}
		pos = herald.Position{Epoch: rec.Epoch, Offset: rec.Offset}
		if len(positions) > 0 {
			pos = herald.Position{Epoch: positions[0].Epoch, Offset: positions[0].Offset}
		}
		if err := c.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]any{"channel": "auction-churn"}}); err != nil {
			t.Fatal(err)
		}
		// Published on the other node while nobody here is subscribed.
		if err := other.h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-churn", Data: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := nd.h.HistoryLoads(); n != 1 {
		t.Fatalf("%d loads of the channel's history for 100 subscriptions; want 1", n)
	}
}

// TestHistoryLingerEnds: a history channel left by its last subscriber lingers for the node's
// HistoryLinger, then is forgotten with the node's interest in it on the bus; a subscription
// after that loads its history again.
func TestHistoryLingerEnds(t *testing.T) {
	bus := memory.NewBus()
	mux := new(broker.Mux)
	b := bus.Attach(memory.Config{NodeID: "n"}, mux.Receive)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	nd := &node{b: b}
	nd.h, nd.addr = serveNode(t, session.Config{}, func(eng *fanout.Engine) cluster.State {
		return cluster.NewReplicated(cluster.Config{HistoryLinger: 300 * time.Millisecond}, eng, b, memory.NewHistory(b), mux.Handle, nil)
	}, historyApp)
	c, _ := join(t, nd, "auction-linger", "")
	interests := func() int { return b.Stats().Interests }
	with := interests()
	if err := c.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]any{"channel": "auction-linger"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "the node's interest in the channel dropped once it stopped lingering", func() (bool, string) {
		return interests() == with-1, strconv.Itoa(interests())
	})
	if err := c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": map[string]any{"channel": "auction-linger"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "a second load", func() (bool, string) {
		return nd.h.HistoryLoads() == 2, strconv.FormatInt(nd.h.HistoryLoads(), 10)
	})
}
