package nats_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestStreamCreationWithoutMetaLeader: while two of the three servers are down, JetStream
// has no meta leader and does not answer a stream's creation. Publishes that need the stream
// fail within their own deadline with a CodeUnavailable error that says so, all of them at
// once (one creation in flight, not one each); once the servers are back, the creation goes
// through and publishes are kept.
func TestStreamCreationWithoutMetaLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of three nats-servers")
	}
	c := servicetest.NATSClusterJetStream(t, 3)
	prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
	b := newClusterBroker(t, c, 0, 3, "node0", prefix, func(herald.BusMessage) {})
	h := newHistory(t, b)
	c.Servers[1].Stop(t)
	c.Servers[2].Stop(t)
	rule := herald.HistoryRule{Channels: "meta-*", Size: 10, TTL: time.Hour}
	msg := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "meta-1", Payload: []byte("x")}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	took := make([]time.Duration, 8)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			t0 := time.Now()
			_, errs[i] = h.Publish(ctx, rule, msg)
			took[i] = time.Since(t0)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if herald.CodeOf(err) != herald.CodeUnavailable || !strings.Contains(herald.MessageOf(err), "has not created it") {
			t.Errorf("publish %d without a meta leader: %v; want CodeUnavailable saying the stream is not created yet", i, err)
		}
		if took[i] > 10*time.Second {
			t.Errorf("publish %d took %v with a deadline of 1 s", i, took[i])
		}
	}
	c.Servers[1].Start(t)
	c.Servers[2].Start(t)
	c.Wait(t)
	poll.NoError(t, 90*time.Second, "a publish to be kept once the servers are back", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := h.Publish(ctx, rule, msg)
		return err
	})
}
