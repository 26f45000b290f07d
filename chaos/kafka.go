//go:build linux

package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/herald-rt/herald/internal/servicetest"
)

// kafkaSource is a Kafka broker (one JVM in KRaft mode, on the bus's address) and a
// producer that writes numbered records to its topic, one partition per channel, which every
// node ingests (channel: the record's key). A record is acknowledged when the broker acks it.
type kafkaSource struct {
	id       string // the producer's name in the events' data: k
	addr     string
	topic    string
	channels []string
	rate     float64
	start    time.Time
	proc     *proc
	client   *kgo.Client
	rng      *rand.Rand
	seq      int // the number of the last record

	mu       sync.Mutex
	events   []Published
	failures map[string]int
}

// startKafka starts the broker, creates the topic and opens the producer.
func startKafka(ctx context.Context, nw *network, dir string, o Options, start time.Time) (*kafkaSource, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, errors.New("--kafka needs java: apt-get install -y openjdk-17-jre-headless maven")
	}
	libs, err := servicetest.KafkaJars()
	if err != nil {
		return nil, err
	}
	ps, err := ports(nw, 9092, 2)
	if err != nil {
		return nil, err
	}
	host := nw.busHost()
	k := &kafkaSource{id: "k", addr: host + ":" + strconv.Itoa(ps[0]), topic: "chaos", rate: o.Rate, start: start,
		failures: map[string]int{}, rng: rand.New(rand.NewPCG(o.Seed, 3<<32))}
	for i := 1; i <= o.KafkaChannels; i++ {
		k.channels = append(k.channels, "chaos-k"+strconv.Itoa(i))
	}
	data := filepath.Join(dir, "kafka")
	props := filepath.Join(dir, "kafka.properties")
	ctrl := host + ":" + strconv.Itoa(ps[1])
	text := strings.Join([]string{
		"process.roles=broker,controller", "node.id=1", "controller.quorum.voters=1@" + ctrl,
		"listeners=PLAINTEXT://" + k.addr + ",CONTROLLER://" + ctrl, "advertised.listeners=PLAINTEXT://" + k.addr,
		"controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT", "log.dirs=" + data,
		"offsets.topic.replication.factor=1", "offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=1", "share.coordinator.state.topic.min.isr=1",
		"min.insync.replicas=1", "default.replication.factor=1", "group.initial.rebalance.delay.ms=0",
		"log.cleaner.dedupe.buffer.size=16777216",
	}, "\n") + "\n"
	if err := os.WriteFile(props, []byte(text), 0o644); err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	for {
		_, _ = crand.Read(id)
		if base64.RawURLEncoding.EncodeToString(id)[0] != '-' {
			break
		}
	}
	out, err := exec.CommandContext(ctx, java, "-cp", filepath.Join(libs, "*"), "kafka.tools.StorageTool", "format",
		"-t", base64.RawURLEncoding.EncodeToString(id), "-c", props).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("formatting kafka's storage: %v: %s", err, out)
	}
	k.proc = &proc{name: "kafka", log: filepath.Join(dir, "kafka.log"), argv: nw.inBus([]string{java, "-Xmx512m",
		"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", filepath.Join(libs, "*"), "kafka.Kafka", props})}
	if err := k.proc.start(); err != nil {
		return nil, err
	}
	if k.client, err = kgo.NewClient(kgo.SeedBrokers(k.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks())); err != nil {
		return k, err
	}
	err = poll(ctx, 2*startWait, k.proc.exited(), func() error { return k.createTopic(ctx) },
		func() string { return "kafka's log ends:\n" + k.proc.logTail(3000) })
	if err != nil {
		return k, fmt.Errorf("kafka: %w", err)
	}
	return k, nil
}

// createTopic creates the topic with a partition per channel.
func (k *kafkaSource) createTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = k.topic, int32(len(k.channels)), 1
	req.Topics = append(req.Topics, tp)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, k.client)
	if err != nil {
		return err
	}
	if c := resp.Topics[0].ErrorCode; c != 0 && c != 36 { // 36: the topic exists (an earlier try)
		return fmt.Errorf("creating topic %s: error code %d", k.topic, c)
	}
	return nil
}

func (k *kafkaSource) owns(channel string) bool {
	for _, c := range k.channels {
		if c == channel {
			return true
		}
	}
	return false
}

func (k *kafkaSource) partition(channel string) int32 {
	for i, c := range k.channels {
		if c == channel {
			return int32(i)
		}
	}
	return 0
}

// warm writes warm-up record n to channel.
func (k *kafkaSource) warm(ctx context.Context, channel string, n int) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = k.client.ProduceSync(ctx, &kgo.Record{Topic: k.topic, Partition: k.partition(channel), Key: []byte(channel),
		Value: []byte(payload{P: warmUp, S: n}.encode())}).FirstErr()
}

// run writes records until publishing ends; each is written again until the broker acks it
// or hard ends.
func (k *kafkaSource) run(publishing, hard context.Context) {
	every := time.Duration(float64(time.Second) / k.rate)
	at := time.Now()
	for publishing.Err() == nil {
		k.seq++
		k.produce(hard, k.seq, k.channels[(k.seq-1)%len(k.channels)])
		at = at.Add(every)
		if now := time.Now(); at.Before(now) {
			at = now
		}
		sleep(publishing, time.Until(at))
	}
}

// finish writes one more record to each channel (see publisher.finish).
func (k *kafkaSource) finish(hard context.Context) {
	for _, ch := range k.channels {
		if hard.Err() != nil {
			return
		}
		k.seq++
		k.produce(hard, k.seq, ch)
	}
}

func (k *kafkaSource) produce(ctx context.Context, seq int, channel string) {
	ev := Published{Publisher: k.id, Seq: seq, Channel: channel, First: time.Since(k.start)}
	rec := &kgo.Record{Topic: k.topic, Partition: k.partition(channel), Key: []byte(channel),
		Value: []byte(payload{P: k.id, S: seq}.encode())}
	for retry := 0; ctx.Err() == nil; retry++ {
		ev.Attempts++
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := k.client.ProduceSync(actx, rec).FirstErr()
		cancel()
		if err == nil {
			ev.Acked = true
			break
		}
		k.mu.Lock()
		k.failures["kafka: "+err.Error()]++
		k.mu.Unlock()
		sleep(ctx, time.Duration(float64(min(retryMost, retryFirst<<min(retry, 10)))*(0.5+k.rng.Float64()/2)))
	}
	ev.Done = time.Since(k.start)
	k.mu.Lock()
	k.events = append(k.events, ev)
	k.mu.Unlock()
}

func (k *kafkaSource) record() ([]Published, map[string]int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := make(map[string]int, len(k.failures))
	for key, v := range k.failures {
		f[key] = v
	}
	return append([]Published(nil), k.events...), f
}

// last is the number of the last record acknowledged on channel, 0 if none.
func (k *kafkaSource) last(channel string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := len(k.events) - 1; i >= 0; i-- {
		if e := k.events[i]; e.Channel == channel && e.Acked {
			return e.Seq
		}
	}
	return 0
}

// close stops the producer and the broker (its pid).
func (k *kafkaSource) close() {
	if k.client != nil {
		k.client.Close()
	}
	if k.proc != nil {
		k.proc.kill()
	}
}
