package redis_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/ingest/redis"
	"github.com/herald-rt/herald/internal/servicetest"
)

// What every source promises (order, acknowledgements, backpressure, bad records, Close,
// states, outages) is ingesttest's suite, run by TestConformanceStream and
// TestConformancePubSub; these tests are Redis' own.

// TestStreamEntryFields: an entry without a "value" field is read as the JSON object of its
// fields, and its id's milliseconds are the events' origin; entries reach the channels in
// stream order.
func TestStreamEntryFields(t *testing.T) {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	for i := range 30 {
		xadd(t, c, "bids", i%3, i)
	}
	pub := &ingesttest.Sink{}
	start(t, srv, pub, nil)
	waitFor(t, "30 events", func() bool { return len(pub.Events()) >= 30 })
	if n := ingesttest.CheckOrder(t, pub.Events()); len(n) != 3 || n["auction-0"] != 10 {
		t.Fatalf("per channel %v", n)
	}
	for _, ev := range pub.Events() {
		if d := time.Since(ev.Origin); d < 0 || d > time.Minute {
			t.Fatalf("event %+v: origin %v ago, want the entry id's time", ev, d)
		}
	}
}

// TestStreamClaimsDeadConsumersEntries: entries a consumer read and never acknowledged (it
// died) are claimed once idle for claim_idle and delivered.
func TestStreamClaimsDeadConsumersEntries(t *testing.T) {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	do(t, c, "XGROUP", "CREATE", "bids", "herald", "0", "MKSTREAM")
	for i := range 10 {
		xadd(t, c, "bids", 1, i)
	}
	do(t, c, "XREADGROUP", "GROUP", "herald", "dead-node", "COUNT", "10", "STREAMS", "bids", ">")
	if n := pending(t, c, "bids", "herald"); n != 10 {
		t.Fatalf("%d pending with the dead consumer, want 10", n)
	}
	pub := &ingesttest.Sink{}
	s := start(t, srv, pub, func(c *redis.Config) { c.ClaimIdle = 300 * time.Millisecond })
	waitFor(t, "the 10 claimed", func() bool { return len(pub.Events()) >= 10 })
	if n := ingesttest.CheckOrder(t, pub.Events()); n["auction-1"] != 10 {
		t.Fatalf("got %v", n)
	}
	waitFor(t, "nothing pending", func() bool { return pending(t, c, "bids", "herald") == 0 })
	if st := s.Stats(); st.Reclaimed != 10 {
		t.Errorf("reclaimed %d, want 10", st.Reclaimed)
	}
	// The dead consumer, holding nothing now, leaves the group once idle for 10 × claim_idle.
	waitFor(t, "the dead consumer forgotten", func() bool {
		cs, err := do(t, c, "XINFO", "CONSUMERS", "bids", "herald").ToArray()
		if err != nil || len(cs) != 1 {
			return false
		}
		m, _ := cs[0].AsStrMap()
		return m["name"] == "node-1"
	})
}

// TestPubSubPatterns: messages on the channels matching the patterns reach the node, each
// as it was published ({value}) on the channel it came on ({topic}); others are not received.
func TestPubSubPatterns(t *testing.T) {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	pub := &ingesttest.Sink{}
	p := ingesttest.Pipeline(t, "redis_pubsub", "{topic}", "bid", "", pub)
	s, err := redis.New(redis.Config{URL: srv.URL(), Subscribe: []string{"bids.*"}}, p)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer ingesttest.Stop(t, s)
	// At most once: what is published before the subscription is lost, so publish until
	// one arrives.
	waitFor(t, "subscribed", func() bool {
		do(t, c, "PUBLISH", "bids.warmup", "w")
		return len(pub.Events()) > 0
	})
	for i := range 100 {
		do(t, c, "PUBLISH", "bids.7", strconv.Itoa(i))
	}
	do(t, c, "PUBLISH", "other", "x")
	// Warm-up messages still in flight may come between; bids.7's come in order.
	on7 := func() []herald.Event {
		var out []herald.Event
		for _, ev := range pub.Events() {
			if ev.Channel == "bids.7" {
				out = append(out, ev)
			}
		}
		return out
	}
	waitFor(t, "100 messages", func() bool { return len(on7()) >= 100 })
	for i, ev := range on7() {
		if ev.Data != fmt.Sprint(i) {
			t.Fatalf("message %d: %+v", i, ev)
		}
	}
	for _, ev := range pub.Events() {
		if ev.Channel != "bids.7" && ev.Channel != "bids.warmup" {
			t.Errorf("a message on a channel outside the pattern: %+v", ev)
		}
	}
}

// TestStreamBackpressureAcksNothingRefused: while the server refuses, entries stay pending
// (XPENDING, Redis's own view); once it takes them, each is delivered once and acknowledged.
// The conformance suite's RefusedNotCommitted proves the same through a restart.
func TestStreamBackpressureAcksNothingRefused(t *testing.T) {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	pub := ingesttest.Refusing()
	s := start(t, srv, pub, nil)
	waitFor(t, "up", func() bool { return s.Stats().State == ingest.StateUp })
	for i := range 20 {
		xadd(t, c, "bids", 2, i)
	}
	waitFor(t, "paused", func() bool { return s.Stats().State == ingest.StatePaused })
	if n := pending(t, c, "bids", "herald"); n == 0 {
		t.Fatal("entries acknowledged while the server refused them")
	}
	pub.SetRefuse(false)
	waitFor(t, "all 20", func() bool { return len(pub.Events()) >= 20 })
	if n := ingesttest.CheckOrder(t, pub.Events()); n["auction-2"] != 20 {
		t.Fatalf("got %v", n)
	}
	waitFor(t, "nothing pending", func() bool { return pending(t, c, "bids", "herald") == 0 })
}
