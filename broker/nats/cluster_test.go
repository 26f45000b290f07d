package nats_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/historytest"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The conformance suites on a cluster of three NATS servers with JetStream (history streams
// R3): every broker is given the three servers, the same first, and the outage cases stop
// every server of the cluster. (With the nodes on different servers the suites do not pass:
// a subscription confirmed by one server is not yet known to the others for a moment, and
// two nodes' messages travel different routes, so neither "once Subscribe returns, a
// publish from another node is received" nor the order of two nodes' publishes across a
// Flush holds; docs/cluster.md, A NATS cluster. TestClusterFailover runs nodes on
// different servers.)

func TestClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	brokertest.Run(t, newServersCluster(servicetest.NATSClusterJetStream(t, 3)))
}

// TestClusterHistoryConformance: the History contract on the cluster, streams of one replica
// (the default).
func TestClusterHistoryConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	historytest.Run(t, newServersHistoryCluster(servicetest.NATSClusterJetStream(t, 3), 1))
}

// TestClusterHistoryConformanceR3 runs the History contract on streams of three replicas
// (Debian's nats-server 2.9.10: ConcurrentNodes holds thanks to the events' IDs; see
// TestClusterHistoryRaceR3).
func TestClusterHistoryConformanceR3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	historytest.Run(t, newServersHistoryCluster(servicetest.NATSClusterJetStream(t, 3), 3))
}

func newServersCluster(c *servicetest.NATSCluster) brokertest.NewCluster {
	return func(t testing.TB, nodes []brokertest.Node) brokertest.Cluster {
		bc := brokertest.Cluster{Stop: c.Stop, Start: c.Start}
		prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
		for _, n := range nodes {
			b, err := nats.New(nats.Config{URL: c.URL(0), Common: broker.Common{NodeID: n.ID, Prefix: prefix, RoundTrip: n.RoundTrip, QueueSize: n.QueueSize}}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			bc.Brokers = append(bc.Brokers, b)
		}
		return bc
	}
}

func newServersHistoryCluster(c *servicetest.NATSCluster, replicas int) historytest.NewCluster {
	return func(t testing.TB, nodes []historytest.Node) historytest.Cluster {
		hc := historytest.Cluster{Stop: c.Stop, Start: c.Start, Lose: func(t testing.TB) { deleteStreams(t, c.Servers[0]) },
			KeysPerNode: replicas > 1 && !servicetest.NATSAtLeast(t, 2, 11), OffsetIDs: replicas > 1}
		prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
		var brokers []*nats.Broker
		for _, n := range nodes {
			b := newClusterBroker(t, c, 0, replicas, n.ID, prefix, n.Handler)
			brokers = append(brokers, b)
			hc.Brokers = append(hc.Brokers, b)
			hc.Histories = append(hc.Histories, newHistory(t, b))
		}
		hc.Reopen = func(t testing.TB, i int) herald.History { return newHistory(t, brokers[i]) }
		return hc
	}
}

// newClusterBroker connects a broker to the cluster, server first%3 first, its history
// streams of replicas, and waits until it is on that server.
func newClusterBroker(t testing.TB, c *servicetest.NATSCluster, first, replicas int, id, prefix string, h herald.BusHandler) *nats.Broker {
	t.Helper()
	first %= len(c.Servers)
	b, err := nats.New(nats.Config{URL: c.URL(first), HistoryReplicas: replicas, Common: broker.Common{NodeID: id, Prefix: prefix}}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	poll.Until(t, historytest.Wait, id+" to connect to "+c.Name(first), func() (bool, string) {
		return b.Server() == c.Name(first), "on " + strconv.Quote(b.Server())
	})
	return b
}

// TestClusterFailover kills (-9) the NATS server a node is connected to, under a steady
// publish load: the node, given only that server's URL, has learnt the others from it and
// is on one of them within 5 s; every interest it holds (one taken while it was cut off
// too) is restored; delivery across nodes goes on; the history streams (R3) keep every
// event and their offsets, without a duplicate or a gap, through the election of new
// leaders, a channel published by both nodes too. The gap is logged.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	c := servicetest.NATSClusterJetStream(t, 3)
	prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*historytest.Wait)
	defer cancel()
	rule := herald.HistoryRule{Channels: "h-*", Size: 10_000, TTL: time.Hour}
	// The rule's stream is made first, to find its leader: the server killed.
	victim := streamLeader(t, c, prefix, rule)
	other := (victim + 1) % len(c.Servers)
	var recs [2]recorder
	// Node 0 knows only the victim's URL: it must learn the others from the cluster.
	b0, err := nats.New(nats.Config{URL: c.Servers[victim].URL(), HistoryReplicas: 3, Common: broker.Common{NodeID: "node0", Prefix: prefix}}, recs[0].handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b0.Close(context.Background()) })
	b1 := newClusterBroker(t, c, other, 3, "node1", prefix, recs[1].handle)
	poll.Until(t, historytest.Wait, "node0 on "+c.Name(victim), func() (bool, string) { return b0.Server() == c.Name(victim), b0.Server() })
	h0, h1 := newHistory(t, b0), newHistory(t, b1)
	for _, b := range []*nats.Broker{b0, b1} {
		if err := b.Subscribe(ctx, "app", "live"); err != nil {
			t.Fatal(err)
		}
	}
	checkReplicas(t, c, 3)

	// The load: each node publishes to "live", to its own history channel and to one both
	// publish to, every 20 ms.
	var (
		mu       sync.Mutex
		kept     = map[string]map[uint64]string{} // history channel → offset → payload, as acknowledged
		failures = map[string]int{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	every := func(f func(n int)) {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			f(n)
		}
	}
	for i, pair := range []struct {
		b *nats.Broker
		h *nats.History
	}{{b0, h0}, {b1, h1}} {
		wg.Add(1)
		go every(func(n int) { // the live load, apart: a history publish may wait for an election
			payload := fmt.Sprintf("%d %d %d", i, n, time.Now().UnixNano())
			if err := pair.b.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "live", Payload: []byte(payload)}); err != nil {
				mu.Lock()
				failures["live"]++
				mu.Unlock()
			}
		})
		for _, ch := range []string{"h-" + strconv.Itoa(i), "h-both"} {
			if kept[ch] == nil {
				kept[ch] = map[uint64]string{}
			}
			wg.Add(1)
			go every(func(n int) {
				payload := fmt.Sprintf("%d %d %d", i, n, time.Now().UnixNano())
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				pos, herr := pair.h.Publish(pctx, rule, event(ch, payload))
				pcancel()
				mu.Lock()
				defer mu.Unlock()
				if herr != nil {
					if herald.CodeOf(herr) != herald.CodeUnavailable {
						t.Errorf("history publish: %v; want success or CodeUnavailable", herr)
					}
					failures[ch]++
					return
				}
				if prev, ok := kept[ch][pos.Offset]; ok {
					t.Errorf("%s: offset %d given twice: %q and %q", ch, pos.Offset, prev, payload)
				}
				kept[ch][pos.Offset] = payload
			})
		}
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	// Both nodes receive node0's load before the kill.
	for i := range recs {
		recs[i].waitFrom(t, "0 ", time.Time{})
	}

	killed := time.Now()
	c.Servers[victim].Stop(t) // kill -9 of node0's server, the stream's leader
	var gap time.Duration
	poll.Until(t, historytest.Wait, "node0 on another server", func() (bool, string) {
		s := b0.Server()
		gap = time.Since(killed)
		return s != "" && s != c.Name(victim), fmt.Sprintf("on %q, %d reconnections", s, b0.Stats().Reconnects)
	})
	// node0 takes an interest while it may still be cut off from the rest of the cluster.
	if err := b0.Subscribe(ctx, "app", "after"); err != nil {
		t.Fatal(err)
	}
	delivered := make([]time.Duration, len(recs))
	for i := range recs {
		delivered[i] = recs[i].waitFrom(t, "0 ", killed).Sub(killed)
	}
	t.Logf("after kill -9 of %s: node0 on %s %v later; node0's publishes reached node0 %v and node1 %v after the kill",
		c.Name(victim), b0.Server(), gap.Round(time.Millisecond), delivered[0].Round(time.Millisecond), delivered[1].Round(time.Millisecond))
	if gap > 5*time.Second {
		t.Errorf("node0 reconnected %v after its server was killed; want within 5 s", gap)
	}
	publishUntil(t, b1, "after", &recs[0])

	// Through the elections of new stream leaders: history publishes succeed again.
	var elected time.Duration
	poll.NoError(t, 2*historytest.Wait, "history publishes to succeed on both nodes after the kill", func() error {
		mu.Lock()
		defer mu.Unlock()
		elected = time.Since(killed)
		for ch, m := range kept {
			if len(m) == 0 || !latestAt(m).After(killed) {
				return fmt.Errorf("%s: no acknowledged publish since the kill (%d failed)", ch, failures[ch])
			}
		}
		return nil
	})
	t.Logf("history publishes acknowledged again %v after the kill", elected.Round(time.Millisecond))
	// Reads (recoveries, gap repairs) are refused with CodeUnavailable until JetStream has
	// a meta leader again, never answered wrong.
	var readable time.Duration
	poll.NoError(t, 2*historytest.Wait, "a history read to succeed after the kill", func() error {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		_, err := h1.Read(rctx, rule, "app", "h-1", 0, 1)
		readable = time.Since(killed)
		if err != nil && herald.CodeOf(err) != herald.CodeUnavailable {
			t.Fatalf("a read after the kill: %v; want success or CodeUnavailable", err)
		}
		return err
	})
	t.Logf("history reads answered again %v after the kill", readable.Round(time.Millisecond))
	for time.Since(killed) < elected+2*time.Second { // the load goes on a while after
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("publishes refused during the failover: %v; acknowledged: %d, %d and %d (both nodes)", failures, len(kept["h-0"]), len(kept["h-1"]), len(kept["h-both"]))
	ctx, cancel = context.WithTimeout(context.Background(), 2*historytest.Wait)
	defer cancel()

	// Every acknowledged event is in the history at its offset; the offsets run without a
	// gap (a publish refused may have been kept all the same, never twice).
	for ch, m := range kept {
		for _, h := range []*nats.History{h0, h1} {
			// A read on a replica whose consumer the failover left behind times out; a
			// later one is answered (measured above): each attempt has its own deadline.
			var page herald.HistoryPage
			poll.NoError(t, 2*historytest.Wait, "a complete read of "+ch, func() error {
				rctx, rcancel := context.WithTimeout(ctx, historytest.Wait/2)
				defer rcancel()
				var err error
				page, err = h.Read(rctx, rule, "app", ch, 0, 100_000)
				return err
			})
			seen := map[string]uint64{}
			for i, e := range page.Entries {
				if e.Offset != uint64(i+1) {
					t.Fatalf("%s: entry %d has offset %d: offsets with a gap", ch, i, e.Offset)
				}
				if o, dup := seen[string(e.Frame)]; dup {
					t.Errorf("%s: %q kept twice, at %d and %d", ch, e.Frame, o, e.Offset)
				}
				seen[string(e.Frame)] = e.Offset
			}
			for o, p := range m {
				if seen[p] != o {
					t.Errorf("%s: %q acknowledged at offset %d; the history has it at %d (0: not at all)", ch, p, o, seen[p])
				}
			}
			if int(page.Latest.Offset) != len(page.Entries) {
				t.Errorf("%s: latest %d, %d entries", ch, page.Latest.Offset, len(page.Entries))
			}
		}
	}
}

// latestAt is when the last acknowledged payload of m was published (its third field).
func latestAt(m map[uint64]string) time.Time {
	var last int64
	for _, p := range m {
		var a, b int
		var at int64
		if _, err := fmt.Sscanf(p, "%d %d %d", &a, &b, &at); err == nil {
			last = max(last, at)
		}
	}
	return time.Unix(0, last)
}

// publishUntil publishes on b's channel every 50 ms until r receives one of them.
func publishUntil(t *testing.T, b herald.Broker, channel string, r *recorder) {
	t.Helper()
	for i := 0; ; i++ {
		if r.has(channel) {
			return
		}
		if i > int(historytest.Wait/(50*time.Millisecond)) {
			t.Fatalf("no publish on %s reached the node with the interest", channel)
		}
		_ = b.Publish(context.Background(), herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: channel, Payload: []byte("x")})
		time.Sleep(50 * time.Millisecond) // the pace of the publishes
	}
}

func event(channel, payload string) herald.BusMessage {
	return herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: channel, Payload: []byte(payload)}
}

// checkReplicas fails unless every stream of the cluster has want replicas.
func checkReplicas(t *testing.T, c *servicetest.NATSCluster, want int) {
	t.Helper()
	checkStreams(t, c, func(s *jetstream.StreamInfo) error {
		if s.Config.Replicas != want || s.Cluster == nil || len(s.Cluster.Replicas)+1 != want {
			return fmt.Errorf("%d replicas (%+v); want %d", s.Config.Replicas, s.Cluster, want)
		}
		return nil
	})
}

// checkStreams fails unless the cluster has a stream and check passes every stream.
func checkStreams(t *testing.T, c *servicetest.NATSCluster, check func(*jetstream.StreamInfo) error) {
	t.Helper()
	nc, err := natsgo.Connect(c.URL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), historytest.Wait)
	defer cancel()
	n := 0
	for s := range js.ListStreams(ctx).Info() {
		n++
		if err := check(s); err != nil {
			t.Errorf("stream %s: %v", s.Config.Name, err)
		}
	}
	if n == 0 {
		t.Error("no stream")
	}
}

// recorder keeps what a node received on the bus, with the time.
type recorder struct {
	mu   sync.Mutex
	msgs []timed
}

type timed struct {
	at time.Time
	m  herald.BusMessage
}

func (r *recorder) handle(m herald.BusMessage) {
	r.mu.Lock()
	r.msgs = append(r.msgs, timed{time.Now(), m})
	r.mu.Unlock()
}

func (r *recorder) has(channel string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.msgs, func(t timed) bool { return t.m.Channel == channel })
}

// waitFrom waits for a message on "live" whose payload starts with prefix and that was
// published after since, and returns when it arrived.
func (r *recorder) waitFrom(t *testing.T, prefix string, since time.Time) time.Time {
	t.Helper()
	var at time.Time
	poll.NoError(t, historytest.Wait, "a publish of node "+prefix+"after "+since.Format(time.StampMilli), func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range r.msgs {
			var node, n int
			var sent int64
			if m.m.Channel != "live" {
				continue
			}
			if _, err := fmt.Sscanf(string(m.m.Payload), "%d %d %d", &node, &n, &sent); err == nil &&
				strconv.Itoa(node)+" " == prefix && time.Unix(0, sent).After(since) {
				at = m.at
				return nil
			}
		}
		return errors.New("none yet")
	})
	return at
}

// streamLeader makes rule's stream under prefix (a publish of a node on server n3) and
// returns the index of the server that leads it.
func streamLeader(t *testing.T, c *servicetest.NATSCluster, prefix string, rule herald.HistoryRule) int {
	t.Helper()
	b := newClusterBroker(t, c, 2, 3, "maker", prefix, func(herald.BusMessage) {})
	defer b.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), historytest.Wait)
	defer cancel()
	if _, err := newHistory(t, b).Publish(ctx, rule, event("h-warm", "warm")); err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect(c.URL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for s := range js.ListStreams(ctx).Info() {
		for i := range c.Servers {
			if s.Cluster != nil && s.Cluster.Leader == c.Name(i) {
				return i
			}
		}
	}
	t.Fatal("no stream with a leader")
	return 0
}
