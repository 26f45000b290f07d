package redisclients

import (
	"context"
	"testing"

	"github.com/herald-rt/herald/internal/servicetest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

const channel = "herald.app.ticker"

var payload = string(make([]byte, 200))

// subscriber keeps one subscriber on the channel, as a node with interest would, so that
// every PUBLISH is delivered (and costs the server what it costs in a cluster).
func subscriber(b *testing.B, addr string) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	d, cancel := c.Dedicate()
	b.Cleanup(cancel)
	d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {}})
	if err := d.Do(context.Background(), d.B().Subscribe().Channel(channel).Build()).Error(); err != nil {
		b.Fatal(err)
	}
}

func rueidisClient(b *testing.B) rueidis.Client {
	srv := servicetest.Redis(b)
	subscriber(b, srv.Addr())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

func goredisClient(b *testing.B) *goredis.Client {
	srv := servicetest.Redis(b)
	subscriber(b, srv.Addr())
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// Concurrent publishers, each waiting for its reply: rueidis pipelines them automatically
// on one connection; go-redis gives each its own pooled connection and round trip.
func BenchmarkRueidisParallel64(b *testing.B) {
	c := rueidisClient(b)
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := c.Do(ctx, c.B().Publish().Channel(channel).Message(payload).Build()).Error(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGoredisParallel64(b *testing.B) {
	c := goredisClient(b)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := c.Publish(ctx, channel, payload).Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// One writer sending explicit batches of 128 PUBLISHes per round trip, as broker/redis's
// writer goroutine does.
const batch = 128

func BenchmarkRueidisBatch128(b *testing.B) {
	c := rueidisClient(b)
	ctx := context.Background()
	cmds := make(rueidis.Commands, 0, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		cmds = cmds[:0]
		for j := 0; j < batch; j++ {
			cmds = append(cmds, c.B().Publish().Channel(channel).Message(payload).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkGoredisBatch128(b *testing.B) {
	c := goredisClient(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		p := c.Pipeline()
		for j := 0; j < batch; j++ {
			p.Publish(ctx, channel, payload)
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// One publisher waiting for each reply: the round trip a hot path must never pay per event.
func BenchmarkRueidisSerial(b *testing.B) {
	c := rueidisClient(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Do(ctx, c.B().Publish().Channel(channel).Message(payload).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGoredisSerial(b *testing.B) {
	c := goredisClient(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Publish(ctx, channel, payload).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
