package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

func testEngine(t *testing.T) *fanout.Engine {
	eng := fanout.New(fanout.Config{Workers: 1, Ping: []byte("p"), Slow: fanout.Close{Frame: []byte("s")}, PongLost: fanout.Close{Frame: []byte("l")}}, nil)
	t.Cleanup(eng.Stop)
	return eng
}

// recoverFrom is what a subscription to ch recovering from since gets; ok false: ch keeps no
// history.
func recoverFrom(a *App, ch *Channel, since *herald.Position) (rec Recovery, ok bool) {
	ok = a.Recover(ch, since, func(r Recovery) { rec = r; rec.ents = append([]*histEntry(nil), r.ents...) })
	return rec, ok
}

// TestSetHistoryRulesLocal: on a single node, rules set while the node runs apply to the
// publishes and the channels that open from then on; a channel open before keeps the rule it
// opened with; a new size applies at once to a history, in its epoch; a channel whose rule is
// removed while open answers unavailable; a rule given back starts a new epoch.
func TestSetHistoryRulesLocal(t *testing.T) {
	eng := testEngine(t)
	l := NewLocal(Config{}, eng)
	a := l.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), nil)
	l.Start(nopListener{})
	t.Cleanup(func() { l.Stop(context.Background()) })
	ctx := context.Background()
	publish := func(n int) {
		t.Helper()
		for range n {
			if err := l.Publish(a, herald.Event{Name: "bid", Channel: "auction-1", Data: "d"}, []byte("frame")); err != nil {
				t.Fatal(err)
			}
		}
	}

	before, _ := l.Acquire(a, "auction-1", herald.Classify("auction-1"))
	publish(1)
	if a.HasHistory("auction-1") {
		t.Fatal("a history without rules")
	}
	if _, err := l.History(ctx, a, "auction-1", 0, 10); herald.CodeOf(err) != herald.CodeNotFound {
		t.Fatalf("REST history without rules: %v, want not found", err)
	}

	a.SetHistoryRules([]herald.HistoryRule{{Channels: "auction-*", Size: 5, TTL: time.Minute}})
	if !a.HasHistory("auction-1") || a.HasHistory("chat-1") {
		t.Fatal("HasHistory does not follow the new rules")
	}
	if _, ok := recoverFrom(a, before, &herald.Position{}); ok {
		t.Fatal("a channel open before the rule recovers: it should keep the rule it opened with (none)")
	}
	l.Release(a, before)
	ch, _ := l.Acquire(a, "auction-1", herald.Classify("auction-1"))
	publish(3)
	rec, ok := recoverFrom(a, ch, nil)
	if !ok || rec.Latest.Offset != 3 || rec.Latest.Epoch == "" {
		t.Fatalf("a channel opened after the rule: ok %v, latest %+v; want a history at offset 3", ok, rec.Latest)
	}
	epoch := rec.Latest.Epoch
	if rec, _ := recoverFrom(a, ch, &herald.Position{Epoch: epoch, Offset: 1}); !rec.Recovered || rec.Len() != 2 {
		t.Fatalf("recovery from offset 1: %+v, want offsets 2 and 3", rec)
	}

	// A smaller size: the history is trimmed at once, in its epoch.
	a.SetHistoryRules([]herald.HistoryRule{{Channels: "auction-*", Size: 1, TTL: time.Minute}})
	page, err := l.History(ctx, a, "auction-1", 0, 10)
	if err != nil || page.Latest != (herald.Position{Epoch: epoch, Offset: 3}) || len(page.Entries) != 1 || page.Entries[0].Offset != 3 {
		t.Fatalf("after size 1: %+v, %v; want the last event only, same epoch", page, err)
	}
	publish(1)
	if rec, _ := recoverFrom(a, ch, &herald.Position{Epoch: epoch, Offset: 3}); !rec.Recovered || rec.Len() != 1 {
		t.Fatalf("recovery from offset 3 after size 1: %+v, want offset 4", rec)
	}
	if rec, _ := recoverFrom(a, ch, &herald.Position{Epoch: epoch, Offset: 2}); rec.Recovered || rec.Reason != ReasonTooOld {
		t.Fatalf("recovery from offset 2 after size 1: %+v, want too_old", rec)
	}

	// The rule removed: the open channel's events are no longer kept, and its recoveries fail.
	a.SetHistoryRules(nil)
	publish(2)
	if rec, _ := recoverFrom(a, ch, &herald.Position{Epoch: epoch, Offset: 4}); rec.Recovered || rec.Reason != ReasonUnavailable {
		t.Fatalf("recovery on a channel whose rule was removed: %+v, want unavailable", rec)
	}
	if _, err := l.History(ctx, a, "auction-1", 0, 10); herald.CodeOf(err) != herald.CodeNotFound {
		t.Fatalf("REST history after the rule was removed: %v, want not found", err)
	}

	// The rule back: a new epoch, the events published without it being gone.
	a.SetHistoryRules([]herald.HistoryRule{{Channels: "auction-*", Size: 5, TTL: time.Minute}})
	publish(1)
	rec, _ = recoverFrom(a, ch, &herald.Position{Epoch: epoch, Offset: 4})
	if rec.Recovered || rec.Reason != ReasonEpochChanged || rec.Latest.Epoch == epoch || rec.Latest.Offset != 1 {
		t.Fatalf("recovery after the rule came back: %+v, want epoch_changed, a new epoch at offset 1", rec)
	}
}

// TestSetHistoryRulesCluster: on a cluster node, a channel that opens after the app's rules
// are set keeps a copy of its history on the bus's store and recovers from it; once the rule
// is removed, the open channel's recoveries answer unavailable and the next channels keep no
// history.
func TestSetHistoryRulesCluster(t *testing.T) {
	eng := testEngine(t)
	mux := new(broker.Mux)
	b := memory.NewBus().Attach(memory.Config{NodeID: "n"}, mux.Receive)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	r := NewReplicated(Config{}, eng, b, memory.NewHistory(b), mux.Handle, nil)
	a := r.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), nil)
	r.Start(nopListener{})
	t.Cleanup(func() { r.Stop(context.Background()) })
	acquire := func(name string) *Channel {
		t.Helper()
		ch, _ := r.Acquire(a, name, herald.Classify(name))
		poll.Until(t, 30*time.Second, "the gate of "+name+" to open", func() (bool, string) { return ch.Gate().Open(), "shut" })
		return ch
	}
	publish := func(name string, n int) {
		t.Helper()
		for range n {
			if err := r.Publish(a, herald.Event{Name: "bid", Channel: name, Data: "d"}, []byte("frame")); err != nil {
				t.Fatal(err)
			}
		}
	}

	before := acquire("auction-1")
	a.SetHistoryRules([]herald.HistoryRule{{Channels: "auction-*", Size: 10, TTL: time.Minute}})
	if _, ok := recoverFrom(a, before, &herald.Position{}); ok {
		t.Fatal("a channel open before the rule recovers")
	}
	ch := acquire("auction-2")
	publish("auction-2", 3)
	var rec Recovery
	poll.Until(t, 30*time.Second, "the copy at offset 3", func() (bool, string) {
		var ok bool
		rec, ok = recoverFrom(a, ch, nil)
		return ok && rec.Latest.Offset == 3, "not yet"
	})
	if got, _ := recoverFrom(a, ch, &herald.Position{Epoch: rec.Latest.Epoch, Offset: 1}); !got.Recovered || got.Len() != 2 {
		t.Fatalf("recovery from offset 1: %+v, want offsets 2 and 3", got)
	}

	a.SetHistoryRules(nil)
	publish("auction-2", 1)
	if got, _ := recoverFrom(a, ch, &herald.Position{Epoch: rec.Latest.Epoch, Offset: 3}); got.Recovered || got.Reason != ReasonUnavailable {
		t.Fatalf("recovery on a channel whose rule was removed: %+v, want unavailable", got)
	}
	if _, ok := recoverFrom(a, acquire("auction-3"), &herald.Position{}); ok {
		t.Fatal("a channel opened after the rule was removed keeps a history")
	}
}
