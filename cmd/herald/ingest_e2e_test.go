package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestIngestKafkaNodes runs two `herald serve` nodes on a Redis bus, both consuming one
// Kafka topic of two partitions in one consumer group, against a real broker:
//
//   - each record is consumed by one node only (the /health counts add up to what was
//     produced) and reaches the subscribers of both nodes through the bus; a bad record is
//     counted once, by reason, in the metrics;
//   - records produced without pause while one node is killed with SIGKILL and started
//     again all reach a subscriber on the other node: none is lost, each channel's first
//     deliveries are in produce order, and the duplicates (records the dead node handed on
//     but had not committed) are counted and logged;
//   - the restarted node consumes again and its own subscribers get new records.
func TestIngestKafkaNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kafka, redis-server and herald nodes")
	}
	k, err := servicetest.StartKafka()
	if err == servicetest.ErrNoJava {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	bus := servicetest.Redis(t)

	admin, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "trades", 2, 1
	req.Topics = append(req.Topics, tp)
	if resp, err := req.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}
	symbols := []string{"BTC", "ETH"} // partition i carries symbols[i]
	seqs := []int{0, 0}
	var produceMu sync.Mutex
	produce := func(n int) {
		produceMu.Lock()
		defer produceMu.Unlock()
		var rs []*kgo.Record
		for p, sym := range symbols {
			for range n {
				v := fmt.Sprintf(`{"symbol":%q,"seq":%d}`, sym, seqs[p])
				rs = append(rs, &kgo.Record{Topic: "trades", Partition: int32(p), Value: []byte(v)})
				seqs[p]++
			}
		}
		if err := admin.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Errorf("produce: %v", err)
		}
	}

	cfgPath := writeFile(t, "herald.yaml", `
ingest:
  - name: trades
    app: app-id
    kafka:
      brokers: [`+k.Addr()+`]
      topics: [trades]
      group: herald-trades
      start: earliest
      session_timeout: 6s
    channel: "{value.symbol}.trade"
    event: trade
    data: "{value.seq}"
`)
	a := startNode(t, "node-a", bus.URL(), "--config", cfgPath)
	b := startNode(t, "node-b", bus.URL(), "--config", cfgPath)
	for _, n := range []*node{a, b} {
		waitIngestUp(t, n, "the source up")
	}
	subsA := []*tradeSub{watchTrades(t, a, "BTC.trade"), watchTrades(t, a, "ETH.trade")}
	subsB := []*tradeSub{watchTrades(t, b, "BTC.trade"), watchTrades(t, b, "ETH.trade")}

	// Phase 1: each record consumed once in the cluster, delivered on both nodes.
	// The bad record first: once partition 0's good records are delivered, it was consumed.
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "trades", Partition: 0, Value: []byte(`{not json`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(100)
	for _, s := range append(subsA, subsB...) {
		s.waitAll(t, 100)
	}
	consumed := 0
	for _, n := range []*node{a, b} {
		h := ingestHealth(t, n)
		consumed += int(h.Consumed)
	}
	if consumed != 201 {
		t.Errorf("the nodes consumed %d records in all, want 201 (each once)", consumed)
	}
	bad := 0.0
	for _, n := range []*node{a, b} {
		bad += metric(t, n, `herald_ingest_bad_records_total{reason="invalid_json",source="trades"}`)
	}
	if bad != 1 {
		t.Errorf("bad records counted %v, want 1", bad)
	}
	handedOff := 0.0
	for _, n := range []*node{a, b} {
		handedOff += metric(t, n, `herald_ingest_handoff_seconds_count{source="trades"}`)
		// Each node delivers every record to its own subscribers, and measures it.
		poll.NoError(t, clusterWait, n.name+": record → frames queued observed for every record", func() error {
			if v, _ := scrape(t, n, `herald_ingest_latency_seconds_count{app_id="app-id"}`); v < 200 {
				return fmt.Errorf("%v observed", v)
			}
			return nil
		})
	}
	if handedOff < 200 {
		t.Errorf("record → node latency observed %v times, want one per good record (200)", handedOff)
	}

	// Phase 2: produce without pause; kill node-a mid-stream and start it again.
	stop := keepProducing(func() { produce(5) })
	subsB[0].waitAll(t, 300)
	a.kill(t)
	subsB[0].waitAll(t, 600)
	a = startNode(t, "node-a", bus.URL(), "--config", cfgPath)
	waitIngestUp(t, a, "the source up again")
	late := watchTrades(t, a, "ETH.trade")
	produceMu.Lock()
	more := seqs[1] + 200
	produceMu.Unlock()
	subsB[1].waitAll(t, more)
	stop()
	produced := seqs[0]
	for _, s := range subsB {
		s.waitAll(t, produced)
		dups := s.check(t)
		t.Logf("%s on node-b: %d records produced, all delivered, %d duplicates", s.channel, produced, dups)
	}
	produce(1) // a record produced now reaches the restarted node's subscriber
	late.waitSeq(t, seqs[1]-1)
	for _, n := range []*node{a, b} {
		if up := metric(t, n, `herald_ingest_source_up{source="trades"}`); up != 1 {
			t.Errorf("%s: ingest_source_up %v", n.name, up)
		}
	}

	// Phase 3: node-a the only consumer (node-b stopped: its partition moves to node-a at
	// once), killed mid-stream and restarted: it resumes from its committed offsets, and a
	// subscriber on node-c, a node without the source, gets every record.
	if err := b.stop(); err != nil {
		t.Fatalf("node-b: %v", err)
	}
	c := startNode(t, "node-c", bus.URL())
	c.waitReady(t, http.StatusOK, `{"ready":true}`)
	subsC := []*tradeSub{watchTrades(t, c, "BTC.trade"), watchTrades(t, c, "ETH.trade")}
	produceMu.Lock()
	from := seqs[0]
	produceMu.Unlock()
	stop = keepProducing(func() { produce(5) })
	subsC[0].waitSeq(t, from+300)
	a.kill(t)
	a = startNode(t, "node-a", bus.URL(), "--config", cfgPath)
	waitIngestUp(t, a, "the only consumer up again")
	produceMu.Lock()
	more = seqs[1] + 200
	produceMu.Unlock()
	subsC[1].waitSeq(t, more)
	stop()
	for _, s := range subsC {
		poll.NoError(t, 2*clusterWait, s.channel+" on node-c: every record from "+strconv.Itoa(from), func() error {
			s.mu.Lock()
			defer s.mu.Unlock()
			seen := map[int]bool{}
			for _, q := range s.seqs {
				seen[q] = true
			}
			for q := from; q < seqs[0]; q++ {
				if !seen[q] {
					return fmt.Errorf("seq %d missing", q)
				}
			}
			return nil
		})
		dups := s.check(t)
		t.Logf("%s on node-c: records %d..%d all delivered across the only consumer's kill -9 and restart, %d duplicates", s.channel, from, seqs[0]-1, dups)
	}
}

// keepProducing calls produce, 5 ms apart, until the stop it returns is called; stop returns
// once produce has returned for the last time.
func keepProducing(produce func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			produce()
			time.Sleep(5 * time.Millisecond) // pacing the producer, not a wait
		}
	}()
	return func() { close(quit); <-done }
}

// tradeSub collects the seq numbers a subscriber receives on one channel.
type tradeSub struct {
	channel string
	mu      sync.Mutex
	seqs    []int
}

func watchTrades(t *testing.T, n *node, channel string) *tradeSub {
	t.Helper()
	s := subscribe(t, n, channel)
	ts := &tradeSub{channel: channel}
	go func() {
		for m := range s.msgs { // drained at once: a subscriber that stops reading is cut off
			if m.Event == "trade" && m.Channel == channel {
				seq, _ := strconv.Atoi(m.DataString())
				ts.mu.Lock()
				ts.seqs = append(ts.seqs, seq)
				ts.mu.Unlock()
			}
		}
	}()
	return ts
}

// distinct counts the distinct seq numbers below n received.
func (s *tradeSub) distinct(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int]bool{}
	for _, q := range s.seqs {
		if q < n {
			seen[q] = true
		}
	}
	return len(seen)
}

// waitAll waits until every seq below n was received.
func (s *tradeSub) waitAll(t *testing.T, n int) {
	t.Helper()
	poll.NoError(t, 2*clusterWait, fmt.Sprintf("%s: seq 0..%d", s.channel, n-1), func() error {
		if got := s.distinct(n); got != n {
			return fmt.Errorf("%d of %d", got, n)
		}
		return nil
	})
}

// waitSeq waits until seq q was received.
func (s *tradeSub) waitSeq(t *testing.T, q int) {
	t.Helper()
	poll.NoError(t, clusterWait, fmt.Sprintf("%s: seq %d", s.channel, q), func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, x := range s.seqs {
			if x == q {
				return nil
			}
		}
		return fmt.Errorf("not yet; last %v", s.seqs[max(0, len(s.seqs)-3):])
	})
}

// check fails unless the first delivery of each seq came in increasing order; it returns
// the number of repeated deliveries.
func (s *tradeSub) check(t *testing.T) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, last, dups := map[int]bool{}, -1, 0
	for _, q := range s.seqs {
		if seen[q] {
			dups++
			continue
		}
		if q < last {
			t.Errorf("%s: seq %d first delivered after %d", s.channel, q, last)
		}
		seen[q], last = true, q
	}
	return dups
}

type ingestSource struct {
	Name, State string
	Consumed    uint64
}

// ingestHealth is the node's one source in /health.
func ingestHealth(t *testing.T, n *node) ingestSource {
	t.Helper()
	_, body, err := n.detail(t)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Ingest []ingestSource }
	if err := json.Unmarshal(body, &h); err != nil || len(h.Ingest) != 1 {
		t.Fatalf("%s: /health %s (%v)", n.name, body, err)
	}
	return h.Ingest[0]
}

// waitIngestUp waits until the node's one source is up.
func waitIngestUp(t *testing.T, n *node, what string) {
	t.Helper()
	n.waitHealth(t, what, func(nodeHealth) error {
		if h := ingestHealth(t, n); h.State != "up" {
			return fmt.Errorf("ingest state %q", h.State)
		}
		return nil
	})
}

// metric reads one sample from the node's metrics.
func metric(t *testing.T, n *node, sample string) float64 {
	t.Helper()
	resp, err := n.client.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("%s: no %s in the metrics", n.name, sample)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
