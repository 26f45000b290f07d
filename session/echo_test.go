package session_test

import (
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/session"
)

// slowEcho starts one clustered server whose bus hands it its cache channels' events late (by
// delay), or never (drop): the bus of a busy node.
func slowEcho(t *testing.T, cfg session.Config, sc cluster.Config, delay time.Duration, drop bool) *session.Server {
	t.Helper()
	return startNodeTap(t, memory.NewBus(), "node-0", cfg, sc, nil, func(m herald.BusMessage, deliver herald.BusHandler) {
		if m.Kind == herald.BusCache {
			if drop {
				return
			}
			time.Sleep(delay)
		}
		deliver(m)
	}, app).h
}

// A publish to a cache channel is answered once the publishing node keeps the event, so a
// subscriber joining there right after the answer gets it replayed, however late the bus
// brings the event back.
func TestCachePublishKeptBeforeAnswer(t *testing.T) {
	h := slowEcho(t, session.Config{}, cluster.Config{}, 100*time.Millisecond, false)
	for i, ch := range []string{"cache-a", "private-cache-b"} {
		if err := h.Publish("app-id", herald.Event{Name: "price", Channel: "x", Data: "1"}, herald.Event{Name: "price", Channel: ch, Data: "42"}); err != nil {
			t.Fatal(err)
		}
		if !h.Cached("app-id", ch) {
			t.Fatalf("publish %d: answered before the node keeps the event of %s", i, ch)
		}
	}
}

// When the bus never brings the event back (lost in an outage), the publisher is answered
// after the publish timeout all the same: the bus has the event.
func TestCachePublishEchoLost(t *testing.T) {
	h := slowEcho(t, session.Config{}, cluster.Config{PublishTimeout: 200 * time.Millisecond}, 0, true)
	start := time.Now()
	if err := h.Publish("app-id", herald.Event{Name: "price", Channel: "cache-a", Data: "42"}); err != nil {
		t.Fatalf("publish: %v; want success (the bus has the event)", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("answered after %v, before the publish timeout, with no echo", d)
	}
	if h.Cached("app-id", "cache-a") {
		t.Fatal("kept an event the bus never brought back")
	}
}
