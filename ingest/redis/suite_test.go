package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/ingest/redis"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestConformanceStream runs the ingest.Source suite against a stream read in a consumer
// group, each case on a redis-server of its own.
func TestConformanceStream(t *testing.T) { ingesttest.Run(t, newStream) }

// TestConformancePubSub runs it against pub/sub patterns: at most once, so the cases that
// need AtLeastOnce or Replay are skipped.
func TestConformancePubSub(t *testing.T) { ingesttest.Run(t, newPubSub) }

// The stream, its group and its dead letters; and the channel pub/sub cases publish on.
const (
	stream      = "bids"
	group       = "herald"
	deadStream  = "bids-dead"
	pubChannel  = "bids.0"
	pubPatterns = "bids.*"
)

func newStream(t testing.TB) *ingesttest.Harness {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	return &ingesttest.Harness{
		Kind:       "redis_stream",
		Topic:      stream,
		Partitions: 1,
		Caps:       ingesttest.AtLeastOnce | ingesttest.Replay | ingesttest.Lag | ingesttest.DeadLetters,
		Produce: func(t testing.TB, _ int, values ...string) {
			for _, v := range values {
				send(t, c, "XADD", stream, "*", "value", v)
			}
		},
		New: func(t testing.TB, p *ingest.Pipeline, o ingesttest.Options) ingest.Source {
			// A short claim_idle: the lag is read every claim_idle/2.
			cfg := redis.Config{URL: srv.URL(), Stream: stream, Group: group, Consumer: "node-1", Start: "earliest",
				Count: o.Batch, ClaimIdle: time.Second}
			return newRedis(t, cfg, p, o)
		},
		DeadLetters: func(t testing.TB, n int) []ingesttest.DeadLetter { return deadLetters(t, c, n) },
		Stop:        srv.Stop,
		Start:       srv.Start,
	}
}

func newPubSub(t testing.TB) *ingesttest.Harness {
	srv := servicetest.Redis(t)
	c := client(t, srv)
	return &ingesttest.Harness{
		Kind:       "redis_pubsub",
		Topic:      pubChannel,
		Partitions: 1,
		Caps:       ingesttest.DeadLetters,
		Produce: func(t testing.TB, _ int, values ...string) {
			for _, v := range values {
				send(t, c, "PUBLISH", pubChannel, v)
			}
		},
		New: func(t testing.TB, p *ingest.Pipeline, o ingesttest.Options) ingest.Source {
			return newRedis(t, redis.Config{URL: srv.URL(), Subscribe: []string{pubPatterns}, Count: o.Batch}, p, o)
		},
		DeadLetters: func(t testing.TB, n int) []ingesttest.DeadLetter { return deadLetters(t, c, n) },
		Stop:        srv.Stop,
		Start:       srv.Start,
	}
}

func newRedis(t testing.TB, cfg redis.Config, p *ingest.Pipeline, o ingesttest.Options) ingest.Source {
	t.Helper()
	if o.DeadLetter {
		cfg.DeadLetter = deadStream
	}
	s, err := redis.New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// send runs cmd, trying again while Redis is unreachable (the client reconnects by itself
// once a restarted server answers).
func send(t testing.TB, c rueidis.Client, args ...string) {
	t.Helper()
	poll.NoError(t, ingesttest.Wait, "Redis to take a command", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.Do(ctx, c.B().Arbitrary(args...).Build()).Error()
	})
}

// deadLetters reads the dead-letter stream until it has n entries.
func deadLetters(t testing.TB, c rueidis.Client, n int) []ingesttest.DeadLetter {
	t.Helper()
	var out []ingesttest.DeadLetter
	poll.Until(t, ingesttest.Wait, "the dead letters", func() (bool, string) {
		entries, err := do(t, c, "XRANGE", deadStream, "-", "+").AsXRange()
		if err != nil {
			return false, err.Error()
		}
		out = out[:0]
		for _, e := range entries {
			f := e.FieldValues
			out = append(out, ingesttest.DeadLetter{Reason: f["herald_reason"], Topic: f["herald_stream"], Position: f["herald_id"], Value: f["value"]})
		}
		return len(out) >= n, ""
	})
	return out
}
