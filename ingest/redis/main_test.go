package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

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

func client(t testing.TB, srv *servicetest.Server) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func do(t testing.TB, c rueidis.Client, args ...string) rueidis.RedisResult {
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
