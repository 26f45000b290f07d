package redis_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/ingest/redis"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

const wait = 30 * time.Second

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, wait, what, func() (bool, string) { return cond(), "" })
}

func client(t *testing.T, srv *servicetest.Server) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func do(t *testing.T, c rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r := c.Do(ctx, c.B().Arbitrary(args...).Build())
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

// start runs a source into pub: channel "auction-{value.item_id}", event "bid", data {value.seq}.
func start(t *testing.T, srv *servicetest.Server, pub ingest.Publisher, mod func(*redis.Config)) *redis.Source {
	t.Helper()
	p := ingesttest.Pipeline(t, "redis_stream", "auction-{value.item_id}", "bid", "{value.seq}", pub)
	cfg := redis.Config{URL: srv.URL(), Stream: "bids", Group: "herald", Consumer: "node-1", Start: "earliest"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := redis.New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { ingesttest.Stop(t, s) })
	return s
}

func xadd(t *testing.T, c rueidis.Client, stream string, item, seq int) {
	do(t, c, "XADD", stream, "*", "item_id", strconv.Itoa(item), "seq", strconv.Itoa(seq))
}

func pending(t *testing.T, c rueidis.Client, stream, group string) int64 {
	arr, err := do(t, c, "XPENDING", stream, group).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := arr[0].AsInt64()
	return n
}

// TestStreamInOrderAcked: entries (fields, no value field: the value is their JSON object)
// reach the channels in stream order and are acknowledged; a restarted source of the group
// gets only what was added since.
func TestStreamInOrderAcked(t *testing.T) {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	for i := range 200 {
		xadd(t, c, "bids", i%3, i)
	}
	pub := &ingesttest.Sink{}
	s := start(t, srv, pub, nil)
	waitFor(t, "200 events", func() bool { return len(pub.Events()) >= 200 })
	if n := ingesttest.CheckOrder(t, pub.Events()); len(n) != 3 || n["auction-0"] != 67 {
		t.Fatalf("per channel %v", n)
	}
	waitFor(t, "nothing pending", func() bool { return pending(t, c, "bids", "herald") == 0 })
	if st := s.Stats(); st.State != ingest.StateUp || st.Consumed != 200 || st.Published != 200 {
		t.Errorf("stats %+v", st)
	}
	ingesttest.Stop(t, s)
	xadd(t, c, "bids", 1, 200)
	pub2 := &ingesttest.Sink{}
	start(t, srv, pub2, nil)
	waitFor(t, "the new entry", func() bool { return len(pub2.Events()) >= 1 })
	xadd(t, c, "bids", 1, 201)
	waitFor(t, "a marker", func() bool { return len(pub2.Events()) >= 2 })
	if got := pub2.Events(); len(got) != 2 || got[0].Data != "200" {
		t.Fatalf("after a restart: %+v", got)
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

// TestStreamBackpressureAcksNothingRefused: while the hub refuses, entries stay pending;
// once it takes them, each is delivered once and acknowledged.
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
		t.Fatal("entries acknowledged while the hub refused them")
	}
	pub.SetRefuse(false)
	waitFor(t, "all 20", func() bool { return len(pub.Events()) >= 20 })
	if n := ingesttest.CheckOrder(t, pub.Events()); n["auction-2"] != 20 {
		t.Fatalf("got %v", n)
	}
	waitFor(t, "nothing pending", func() bool { return pending(t, c, "bids", "herald") == 0 })
}

// TestStreamBadEntriesDeadLettered: bad entries are skipped, acknowledged and added to the
// dead-letter stream with their reason.
func TestStreamBadEntriesDeadLettered(t *testing.T) {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	do(t, c, "XADD", "bids", "*", "value", `{"item_id":1,"seq":1}`)
	do(t, c, "XADD", "bids", "*", "value", `{oops`)
	do(t, c, "XADD", "bids", "*", "seq", "2")
	do(t, c, "XADD", "bids", "*", "value", `{"item_id":1,"seq":3}`)
	pub := &ingesttest.Sink{}
	s := start(t, srv, pub, func(c *redis.Config) { c.DeadLetter = "bids-dead" })
	waitFor(t, "2 good entries", func() bool { return len(pub.Events()) >= 2 })
	waitFor(t, "2 dead letters", func() bool { return s.Stats().DeadLettered == 2 })
	entries, err := do(t, c, "XRANGE", "bids-dead", "-", "+").AsXRange()
	if err != nil || len(entries) != 2 {
		t.Fatalf("dead letters %v %v", entries, err)
	}
	if r := entries[0].FieldValues; r["herald_reason"] != "invalid_json" || r["value"] != "{oops" || r["herald_stream"] != "bids" {
		t.Errorf("dead letter 0: %v", r)
	}
	if r := entries[1].FieldValues; r["herald_reason"] != "missing_field" {
		t.Errorf("dead letter 1: %v", r)
	}
	waitFor(t, "nothing pending", func() bool { return pending(t, c, "bids", "herald") == 0 })
}

// TestStreamRedisRestart: Redis killed and started again: the source reports down, then
// reconnects, recreates its group and delivers what is added.
func TestStreamRedisRestart(t *testing.T) {
	srv := servicetest.Redis(t)
	pub := &ingesttest.Sink{}
	s := start(t, srv, pub, nil)
	c := client(t, srv)
	xadd(t, c, "bids", 1, 0)
	waitFor(t, "the first entry", func() bool { return len(pub.Events()) >= 1 })
	srv.Stop(t)
	waitFor(t, "down", func() bool { return s.Stats().State == ingest.StateDown })
	srv.Start(t)
	waitFor(t, "up", func() bool { return s.Stats().State == ingest.StateUp })
	c2 := client(t, srv)
	for i := 1; i < 10; i++ {
		xadd(t, c2, "bids", 1, i)
	}
	waitFor(t, "all 10", func() bool { return len(pub.Events()) >= 10 })
	ingesttest.CheckOrder(t, pub.Events())
}

// TestPubSub: messages published on channels matching the patterns reach the hub in order.
func TestPubSub(t *testing.T) {
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

// TestStreamRedisUnreachableAtStart: a source started while Redis is down reports down, then
// reads once it is up; its goroutine ends with Close.
func TestStreamRedisUnreachableAtStart(t *testing.T) {
	srv := servicetest.Redis(t)
	goroutines := runtime.NumGoroutine() // with the server's waiter, as after its restart
	srv.Stop(t)
	pub := &ingesttest.Sink{}
	s := start(t, srv, pub, nil)
	waitFor(t, "down", func() bool { return s.Stats().State == ingest.StateDown })
	srv.Start(t)
	waitFor(t, "up", func() bool { return s.Stats().State == ingest.StateUp })
	c := client(t, srv)
	xadd(t, c, "bids", 3, 1)
	waitFor(t, "the entry", func() bool { return len(pub.Events()) >= 1 })
	ingesttest.Stop(t, s)
	c.Close()
	waitFor(t, "the source's goroutines gone", func() bool { return runtime.NumGoroutine() <= goroutines })
}
