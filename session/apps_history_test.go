package session_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/session"
)

// missed subscribes a client of key to channel, has it take the position of events from..to,
// leaves, and has events to+1..to+2 published while it is away: it returns the position to
// recover from.
func missed(t *testing.T, h func(string, int, int), addr, key, channel string) herald.Position {
	t.Helper()
	c := connected(t, addr, key)
	_, _, rec := subscribeRecover(t, c, channel, nil)
	if rec.Epoch == "" {
		t.Fatalf("%s %s: subscription without a position (%+v): the channel keeps no history", key, channel, rec)
	}
	h(channel, 1, 2)
	var last position
	for range 2 {
		m, err := c.Expect("pusher_internal:position", patience)
		if err != nil {
			t.Fatal(err)
		}
		last = decodePosition(t, m)
	}
	c.Close()
	h(channel, 3, 4)
	return herald.Position{Epoch: last.Epoch, Offset: last.Offset}
}

// TestAppHistoryChangeWhileServing: an app's history rules changed in its store apply,
// without a restart, to the channels that open from then on: a channel open before keeps
// the rule it opened with until its last subscriber leaves; the rules for apps by id
// (session.Config.History) apply after the app's own, whose rule for a channel wins; a rule
// removed while a channel is open makes its recoveries answer unavailable.
func TestAppHistoryChangeWhileServing(t *testing.T) {
	plain := &herald.App{ID: "app-id", Key: "app-key", Secret: "s"}
	store := &changingStore{apps: map[string]*herald.App{"app-id": plain,
		"tenant-1": {ID: "tenant-1", Key: "t1-key", Secret: "s"},
		"tenant-2": {ID: "tenant-2", Key: "t2-key", Secret: "s", History: []herald.HistoryRule{{Channels: "chat-*", Size: 1, TTL: time.Minute}}}}}
	cfg := session.Config{MaxConnections: 1000, History: []herald.AppsHistoryRule{
		{Apps: "tenant-*", HistoryRule: herald.HistoryRule{Channels: "chat-*", Size: 10, TTL: time.Minute}}}}
	addr := serveStoreConfig(t, store, cfg, local(cluster.Config{}))
	publish := func(app string) func(string, int, int) {
		return func(channel string, from, to int) {
			for i := from; i <= to; i++ {
				if err := store.h.Publish(app, herald.Event{Name: "bid", Channel: channel, Data: strings.Repeat("x", i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// Open before the rule: it keeps none until its last subscriber leaves.
	early := connected(t, addr, "app-key")
	if _, _, rec := subscribeRecover(t, early, "auction-1", &herald.Position{Epoch: "e", Offset: 1}); rec.Reason != "no_history" {
		t.Fatalf("before the rule: %+v, want no_history", rec)
	}
	store.set("app-id", &herald.App{ID: "app-id", Key: "app-key", Secret: "s", History: []herald.HistoryRule{{Channels: "auction-*", Size: 5, TTL: time.Minute}}})
	late := connected(t, addr, "app-key")
	if _, _, rec := subscribeRecover(t, late, "auction-1", &herald.Position{Epoch: "e", Offset: 1}); rec.Reason != "no_history" {
		t.Fatalf("the rule set while the channel is open: %+v, want no_history", rec)
	}
	early.Close()
	late.Close()
	// The node closes the channel once it has read both connections' ends: a subscription
	// before that would find it open, without history.
	poll.Until(t, patience, "auction-1 to close with its last subscriber", func() (bool, string) {
		st, occupied := store.h.Channel("app-id", "auction-1")
		return !occupied, fmt.Sprintf("%d subscriptions", st.SubscriptionCount)
	})

	// Closed and opened again: the new rule.
	auction := missed(t, publish("app-id"), addr, "app-key", "auction-1")
	c := connected(t, addr, "app-key")
	events, _, rec := subscribeRecover(t, c, "auction-1", &auction)
	if strings.Join(events, ",") != "xxx,xxxx" || rec.Recovered == nil || !*rec.Recovered {
		t.Fatalf("recovery under the new rule: %v, %+v; want events 3 and 4, recovered", events, rec)
	}

	// The rules for apps by id; an app's own rule first.
	from := missed(t, publish("tenant-1"), addr, "t1-key", "chat-1")
	events, _, rec = subscribeRecover(t, connected(t, addr, "t1-key"), "chat-1", &from)
	if len(events) != 2 || rec.Recovered == nil || !*rec.Recovered {
		t.Fatalf("tenant-1 under the rule for tenant-*: %v, %+v; want events 3 and 4, recovered", events, rec)
	}
	from = missed(t, publish("tenant-2"), addr, "t2-key", "chat-1")
	if _, _, rec = subscribeRecover(t, connected(t, addr, "t2-key"), "chat-1", &from); rec.Reason != "too_old" {
		t.Fatalf("tenant-2 under its own rule (size 1): %+v, want too_old", rec)
	}

	// The rule removed while c holds the channel open: recoveries on it answer unavailable.
	store.set("app-id", plain)
	publish("app-id")("auction-1", 5, 5)
	if _, err := c.Expect("bid", patience); err != nil {
		t.Fatal(err)
	}
	if _, _, rec = subscribeRecover(t, connected(t, addr, "app-key"), "auction-1", &auction); rec.Reason != "unavailable" {
		t.Fatalf("the rule removed while the channel is open: %+v, want unavailable", rec)
	}
}
