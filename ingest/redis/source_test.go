package redis_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/redis/rueidis"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/redis"
	"github.com/herald-rt/herald/internal/servicetest"
)

const wait = 30 * time.Second

// sink is the hub as the pipeline sees it: it keeps what it takes, and refuses while told.
type sink struct {
	mu     sync.Mutex
	evs    []herald.Event
	refuse bool
}

func (s *sink) Publish(_ string, evs ...herald.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse {
		return herald.Errorf(herald.CodeBusy, "fan-out queues are full, retry later")
	}
	s.evs = append(s.evs, evs...)
	return nil
}

func (s *sink) setRefuse(v bool) { s.mu.Lock(); s.refuse = v; s.mu.Unlock() }

func (s *sink) events() []herald.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]herald.Event(nil), s.evs...)
}

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
	tp := func(s string) *ingest.Template {
		x, err := ingest.ParseTemplate(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	p, err := ingest.New(ingest.Config{Name: "t", Kind: "redis_stream", App: &herald.App{ID: "app"},
		Channel: tp("auction-{value.item_id}"), Event: tp("bid"), Data: tp("{value.seq}")}, pub)
	if err != nil {
		t.Fatal(err)
	}
	cfg := redis.Config{URL: srv.URL(), Stream: "bids", Group: "herald", Consumer: "node-1", Start: "earliest"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := redis.New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { stop(t, s) })
	return s
}

func stop(t *testing.T, s *redis.Source) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
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

func checkOrder(t *testing.T, evs []herald.Event) map[string]int {
	t.Helper()
	last, n := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		seq, _ := strconv.Atoi(ev.Data)
		if prev, ok := last[ev.Channel]; ok && seq <= prev {
			t.Fatalf("channel %s: seq %d after %d", ev.Channel, seq, prev)
		}
		last[ev.Channel], n[ev.Channel] = seq, n[ev.Channel]+1
	}
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
	pub := &sink{}
	s := start(t, srv, pub, nil)
	waitFor(t, "200 events", func() bool { return len(pub.events()) >= 200 })
	if n := checkOrder(t, pub.events()); len(n) != 3 || n["auction-0"] != 67 {
		t.Fatalf("per channel %v", n)
	}
	waitFor(t, "nothing pending", func() bool { return pending(t, c, "bids", "herald") == 0 })
	if st := s.Stats(); st.State != ingest.StateUp || st.Consumed != 200 || st.Published != 200 {
		t.Errorf("stats %+v", st)
	}
	stop(t, s)
	xadd(t, c, "bids", 1, 200)
	pub2 := &sink{}
	start(t, srv, pub2, nil)
	waitFor(t, "the new entry", func() bool { return len(pub2.events()) >= 1 })
	xadd(t, c, "bids", 1, 201)
	waitFor(t, "a marker", func() bool { return len(pub2.events()) >= 2 })
	if got := pub2.events(); len(got) != 2 || got[0].Data != "200" {
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
	pub := &sink{}
	s := start(t, srv, pub, func(c *redis.Config) { c.ClaimIdle = 300 * time.Millisecond })
	waitFor(t, "the 10 claimed", func() bool { return len(pub.events()) >= 10 })
	if n := checkOrder(t, pub.events()); n["auction-1"] != 10 {
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
	pub := &sink{refuse: true}
	s := start(t, srv, pub, nil)
	waitFor(t, "up", func() bool { return s.Stats().State == ingest.StateUp })
	for i := range 20 {
		xadd(t, c, "bids", 2, i)
	}
	waitFor(t, "paused", func() bool { return s.Stats().State == ingest.StatePaused })
	if n := pending(t, c, "bids", "herald"); n == 0 {
		t.Fatal("entries acknowledged while the hub refused them")
	}
	pub.setRefuse(false)
	waitFor(t, "all 20", func() bool { return len(pub.events()) >= 20 })
	if n := checkOrder(t, pub.events()); n["auction-2"] != 20 {
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
	pub := &sink{}
	s := start(t, srv, pub, func(c *redis.Config) { c.DeadLetter = "bids-dead" })
	waitFor(t, "2 good entries", func() bool { return len(pub.events()) >= 2 })
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
	pub := &sink{}
	s := start(t, srv, pub, nil)
	c := client(t, srv)
	xadd(t, c, "bids", 1, 0)
	waitFor(t, "the first entry", func() bool { return len(pub.events()) >= 1 })
	srv.Stop(t)
	waitFor(t, "down", func() bool { return s.Stats().State == ingest.StateDown })
	srv.Start(t)
	waitFor(t, "up", func() bool { return s.Stats().State == ingest.StateUp })
	c2 := client(t, srv)
	for i := 1; i < 10; i++ {
		xadd(t, c2, "bids", 1, i)
	}
	waitFor(t, "all 10", func() bool { return len(pub.events()) >= 10 })
	checkOrder(t, pub.events())
}

// TestPubSub: messages published on channels matching the patterns reach the hub in order.
func TestPubSub(t *testing.T) {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	pub := &sink{}
	tp := func(s string) *ingest.Template { x, _ := ingest.ParseTemplate(s); return x }
	p, _ := ingest.New(ingest.Config{Name: "ps", App: &herald.App{ID: "app"}, Channel: tp("{topic}"), Event: tp("bid")}, pub)
	s, err := redis.New(redis.Config{URL: srv.URL(), Subscribe: []string{"bids.*"}}, p)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer stop(t, s)
	// At most once: what is published before the subscription is lost, so publish until
	// one arrives.
	waitFor(t, "subscribed", func() bool {
		do(t, c, "PUBLISH", "bids.warmup", "w")
		return len(pub.events()) > 0
	})
	for i := range 100 {
		do(t, c, "PUBLISH", "bids.7", strconv.Itoa(i))
	}
	do(t, c, "PUBLISH", "other", "x")
	// Warm-up messages still in flight may come between; bids.7's come in order.
	on7 := func() []herald.Event {
		var out []herald.Event
		for _, ev := range pub.events() {
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
	for _, ev := range pub.events() {
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
	pub := &sink{}
	s := start(t, srv, pub, nil)
	waitFor(t, "down", func() bool { return s.Stats().State == ingest.StateDown })
	srv.Start(t)
	waitFor(t, "up", func() bool { return s.Stats().State == ingest.StateUp })
	c := client(t, srv)
	xadd(t, c, "bids", 3, 1)
	waitFor(t, "the entry", func() bool { return len(pub.events()) >= 1 })
	stop(t, s)
	c.Close()
	waitFor(t, "the source's goroutines gone", func() bool { return runtime.NumGoroutine() <= goroutines })
}
