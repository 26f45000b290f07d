package kafka_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/ingest/kafka"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// One broker for the package: the JVM takes seconds to start.
func TestMain(m *testing.M) {
	code := m.Run()
	servicetest.CloseSharedKafka()
	os.Exit(code)
}

// wait bounds every wait of these tests: the machine is shared.
const wait = ingesttest.Wait

var names atomic.Int64

// unique returns a topic or group name of its own for this test.
func unique(t testing.TB, what string) string {
	return fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), what, names.Add(1))
}

// admin is a plain client for creating topics, producing and reading dead letters.
func admin(t testing.TB, k *servicetest.Kafka) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, cl *kgo.Client, name string, partitions int32) {
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
func produce(t testing.TB, cl *kgo.Client, topic string, part int32, values ...string) {
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

// waitFor polls until cond holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, wait, what, func() (bool, string) { return cond(), "" })
}

// config is a source of topic in group, from the topic's start.
func config(k *servicetest.Kafka, topic, group string) kafka.Config {
	return kafka.Config{Brokers: []string{k.Addr()}, Topics: []string{topic}, Group: group, Start: "earliest",
		SessionTimeout: 6 * time.Second}
}

// start runs a source of the topic in group into pub: channel {value.ch}, event "e".
func start(t *testing.T, k *servicetest.Kafka, pub ingest.Publisher, topic, group string) *kafka.Source {
	t.Helper()
	s, err := kafka.New(config(k, topic, group), ingesttest.Pipeline(t, "kafka", "{value.ch}", "e", "{value.seq}", pub))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { ingesttest.Stop(t, s) })
	return s
}

func rec(ch string, seq int) string { return fmt.Sprintf(`{"ch":%q,"seq":%d}`, ch, seq) }
