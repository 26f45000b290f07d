package kafka_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/kafka"
	"github.com/herald-rt/herald/internal/servicetest"
)

// One broker for the package: the JVM takes seconds to start.
func TestMain(m *testing.M) {
	code := m.Run()
	servicetest.CloseSharedKafka()
	os.Exit(code)
}

// wait bounds every wait of these tests: the machine is shared.
const wait = 60 * time.Second

var names atomic.Int64

// unique returns a topic or group name of its own for this test.
func unique(t *testing.T, what string) string {
	return fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), what, names.Add(1))
}

// admin is a plain client for creating topics, producing and reading dead letters.
func admin(t *testing.T, k *servicetest.Kafka) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, cl *kgo.Client, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, tp)
	req.TimeoutMillis = 10000
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("creating topic %s: error code %d", name, c)
	}
}

// produce writes one record per value to partition part, synchronously.
func produce(t *testing.T, cl *kgo.Client, topic string, part int32, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var rs []*kgo.Record
	for _, v := range values {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// sink is the hub as the pipeline sees it: it keeps what it takes, and refuses while told.
type sink struct {
	mu      sync.Mutex
	evs     []herald.Event
	refuse  bool
	refused int
}

func (s *sink) Publish(_ string, evs ...herald.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse {
		s.refused++
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

// waitFor polls until cond holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, wait, what, func() (bool, string) { return cond(), "" })
}

type source struct {
	*kafka.Source
	p *ingest.Pipeline
}

// start runs a source of the topic in group into pub: channel {value.ch}, event "e".
func start(t *testing.T, k *servicetest.Kafka, pub ingest.Publisher, topic, group string, mod func(*kafka.Config)) source {
	t.Helper()
	tp := func(s string) *ingest.Template {
		x, err := ingest.ParseTemplate(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	p, err := ingest.New(ingest.Config{Name: "t", Kind: "kafka", App: &herald.App{ID: "app"},
		Channel: tp("{value.ch}"), Event: tp("e"), Data: tp("{value.seq}")}, pub)
	if err != nil {
		t.Fatal(err)
	}
	cfg := kafka.Config{Brokers: []string{k.Addr()}, Topics: []string{topic}, Group: group, Start: "earliest",
		SessionTimeout: 6 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	s, err := kafka.New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { stop(t, s) })
	return source{s, p}
}

func stop(t *testing.T, s *kafka.Source) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func rec(ch string, seq int) string { return fmt.Sprintf(`{"ch":%q,"seq":%d}`, ch, seq) }
