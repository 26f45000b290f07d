package redis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestSentinelFailover: two nodes on a primary found through three sentinels; under a steady
// publish load the primary is killed (SIGKILL); once the sentinels promote the replica the
// nodes deliver again within 10 s, and a history channel's next event starts a new epoch
// (the replica may lack the last writes: its offsets are not to be believed).
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a failover takes seconds")
	}
	set := servicetest.RedisSentinel(t)
	var got atomic.Int64
	var mu sync.Mutex
	var last time.Time
	recv := func(m herald.BusMessage) {
		got.Add(1)
		mu.Lock()
		last = time.Now()
		mu.Unlock()
	}
	cfg := redis.Config{URL: set.URL(), Common: broker.Common{NodeID: "n0", Prefix: "fo", Timeout: time.Second}}
	a, err := redis.New(cfg, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	cfg.NodeID = "n1"
	b, err := redis.New(cfg, recv)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if a.Mode() != redis.Sentinel || !a.Connected() || !b.Connected() {
		t.Fatalf("mode %s, connected %v %v", a.Mode(), a.Connected(), b.Connected())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Subscribe(ctx, "app", "load"); err != nil {
		t.Fatal(err)
	}
	h := redis.NewHistory(a)
	rule := herald.HistoryRule{Size: 100, TTL: time.Hour}
	hist := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "hist", Payload: []byte("h")}
	var before herald.Position
	for range 5 {
		if before, err = h.Publish(ctx, rule, hist); err != nil {
			t.Fatal(err)
		}
	}
	// A steady load: one publish every 10 ms, from node 0 to node 1.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = a.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "load", Payload: []byte("x")})
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	poll.Until(t, 20*time.Second, "the load to flow", func() (bool, string) { return got.Load() > 10, fmt.Sprint(got.Load()) })
	old := set.Primary.Addr()
	killed := time.Now()
	set.Primary.Stop(t)
	var promoted time.Time
	poll.Until(t, time.Minute, "the sentinels to promote the replica", func() (bool, string) {
		p := set.CurrentPrimary(t)
		promoted = time.Now()
		return p == set.Replica.Addr(), "primary " + p + ", was " + old
	})
	n := got.Load()
	poll.Until(t, 10*time.Second, "delivery again within 10 s of the promotion", func() (bool, string) {
		return got.Load() > n+5 && a.Connected() && b.Connected(), fmt.Sprintf("%d received since the promotion; connected %v %v", got.Load()-n, a.Connected(), b.Connected())
	})
	mu.Lock()
	back := last
	mu.Unlock()
	t.Logf("failover: promotion %v after the kill; delivery back %v after the promotion (%v after the kill)",
		promoted.Sub(killed).Round(time.Millisecond), back.Sub(promoted).Round(time.Millisecond), back.Sub(killed).Round(time.Millisecond))
	after, err := h.Publish(ctx, rule, hist)
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch == before.Epoch {
		t.Fatalf("history after the failover went on in epoch %s at %d (was at %d): the replica's offsets are believed", after.Epoch, after.Offset, before.Offset)
	}
	if after.Offset != 1 {
		t.Errorf("new epoch starts at offset %d, want 1", after.Offset)
	}
	page, err := h.Read(ctx, rule, "app", "hist", 0, 100)
	if err != nil || page.Latest != after || len(page.Entries) != 1 {
		t.Fatalf("Read after the failover: %+v, %v; want only the new epoch's event", page, err)
	}
}
