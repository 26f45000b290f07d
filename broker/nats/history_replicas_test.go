package nats_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/historytest"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/nats-io/nats.go/jetstream"
)

// raceOffsets has six nodes, two on each server of c, publish to one channel of a stream of
// replicas at once, each node publishes one after another: the offsets given are distinct
// and consecutive from 1, and the history keeps each event once, at its offset. It is the
// race of History's optimistic concurrency at its hardest: as many publishes of one channel
// in flight as nodes, through every server.
func raceOffsets(t *testing.T, c *servicetest.NATSCluster, replicas int) {
	const nodes, per = 6, 100
	prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
	rule := herald.HistoryRule{Channels: "race-*", Size: 10_000, TTL: time.Hour}
	var hs []*nats.History
	for i := range nodes {
		b := newClusterBroker(t, c, i, replicas, "node"+strconv.Itoa(i), prefix, func(herald.BusMessage) {})
		hs = append(hs, newHistory(t, b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*historytest.Wait)
	defer cancel()
	// The stream first, by one node: its creation is not what is raced here.
	if _, err := hs[0].Publish(ctx, rule, event("race-x", "first")); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		given = map[uint64]string{} // offset → payload
		wg    sync.WaitGroup
	)
	start := make(chan struct{})
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for n := range per {
				payload := fmt.Sprintf("%d:%d", i, n)
				pos, err := h.Publish(ctx, rule, event("race-1", payload))
				if err != nil {
					t.Errorf("node%d: %v", i, err)
					return
				}
				mu.Lock()
				if old, dup := given[pos.Offset]; dup {
					t.Errorf("offset %d given to %q and %q", pos.Offset, old, payload)
				}
				given[pos.Offset] = payload
				mu.Unlock()
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d publishes of %d nodes to one channel (replicas %d) in %v", len(given), nodes, replicas, time.Since(began).Round(time.Millisecond))
	page, err := hs[nodes-1].Read(ctx, rule, "app", "race-1", 0, 2*nodes*per)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range page.Entries {
		if e.Offset != uint64(i+1) {
			t.Fatalf("entry %d of the history has offset %d; want %d (a duplicate or a gap)", i, e.Offset, i+1)
		}
	}
	if len(page.Entries) != nodes*per || len(given) != nodes*per {
		t.Fatalf("%d entries in the history and %d distinct offsets given; want %d", len(page.Entries), len(given), nodes*per)
	}
	// The events' IDs (idempotency keys, and positions in a replicated stream) are remembered
	// for the key window (herald.DefaultKeyWindow; the TTL is longer), at most 30 s in a
	// replicated stream.
	want := herald.DefaultKeyWindow
	if replicas > 1 {
		want = 30 * time.Second
	}
	checkStreams(t, c, func(s *jetstream.StreamInfo) error {
		if s.Config.Duplicates != want {
			return fmt.Errorf("duplicate window %v, want %v", s.Config.Duplicates, want)
		}
		return nil
	})
}

// TestClusterHistoryRace races six nodes' publishes to one channel on streams of one replica
// (the default).
func TestClusterHistoryRace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	raceOffsets(t, servicetest.NATSClusterJetStream(t, 3), 1)
}

// TestClusterHistoryRaceR3 races them on streams of three replicas, on Debian's
// nats-server 2.9.10: its replicated streams check a publish's expected last sequence of the
// channel against what they have stored only, not against the publishes in flight, and
// without the events' IDs (offsetID) about a third of the offsets were given twice (605
// duplicates in 3 runs).
func TestClusterHistoryRaceR3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	raceOffsets(t, servicetest.NATSClusterJetStream(t, 3), 3)
}

// TestClusterHistoryRaceR3Newer races them on streams of three replicas of nats-server
// servicetest.NATSReplicatedVersion, which refuses a publish while another of its channel
// is in flight (History tries it again).
func TestClusterHistoryRaceR3Newer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	raceOffsets(t, servicetest.NATSClusterReplicated(t, 3), 3)
}

// BenchmarkClusterHistoryPublishR3 is BenchmarkHistoryPublish on a cluster of three servers
// (Debian's), streams of three replicas: each publish carries its offsetID.
func BenchmarkClusterHistoryPublishR3(b *testing.B) {
	historytest.BenchmarkPublish(b, newServersHistoryCluster(servicetest.NATSClusterJetStream(b, 3), 3))
}
