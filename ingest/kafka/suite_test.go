package kafka_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/ingest/kafka"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestConformance runs the ingest.Source suite against the package's broker: each case gets
// a topic of three partitions, a group and a dead-letter topic of its own.
func TestConformance(t *testing.T) { ingesttest.Run(t, newSource) }

func newSource(t testing.TB) *ingesttest.Harness {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group, dlq := unique(t, "topic"), unique(t, "group"), unique(t, "dlq")
	createTopic(t, cl, topic, 3)
	createTopic(t, cl, dlq, 1)
	stopped := false
	t.Cleanup(func() { // the broker is the package's: the next test needs it
		if stopped {
			if err := k.Start(); err != nil {
				t.Errorf("starting the broker again: %v", err)
			}
		}
	})
	return &ingesttest.Harness{
		Kind:       "kafka",
		Topic:      topic,
		Partitions: 3,
		Caps:       ingesttest.AtLeastOnce | ingesttest.Replay | ingesttest.Lag | ingesttest.DeadLetters,
		Produce: func(t testing.TB, part int, values ...string) {
			produce(t, cl, topic, int32(part), values...)
		},
		New: func(t testing.TB, p *ingest.Pipeline, o ingesttest.Options) ingest.Source {
			cfg := config(k, topic, group)
			cfg.PollRecords = o.Batch
			if o.DeadLetter {
				cfg.DeadLetter = dlq
			}
			s, err := kafka.New(cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		DeadLetters: func(t testing.TB, n int) []ingesttest.DeadLetter { return deadLetters(t, k, dlq, n) },
		Stop: func(testing.TB) {
			k.Kill()
			stopped = true
		},
		Start: func(t testing.TB) {
			if err := k.Start(); err != nil {
				t.Fatal(err)
			}
			stopped = false
		},
	}
}

// deadLetters reads the dead-letter topic from its start until it has n records.
func deadLetters(t testing.TB, k *servicetest.Kafka, dlq string, n int) []ingesttest.DeadLetter {
	t.Helper()
	rd, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var out []ingesttest.DeadLetter
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for len(out) < n && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			hdr := func(k string) string {
				for _, h := range r.Headers {
					if h.Key == k {
						return string(h.Value)
					}
				}
				return ""
			}
			out = append(out, ingesttest.DeadLetter{Reason: hdr("herald-reason"), Topic: hdr("herald-topic"),
				Position: hdr("herald-offset"), Value: string(r.Value)})
		})
	}
	if len(out) < n {
		t.Fatalf("%d dead letters after %v, want %d", len(out), wait, n)
	}
	return out
}
