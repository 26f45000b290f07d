package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/metrics"
)

// TestClusterBusHistory: a node on a bus keeps its history channels' events on the bus's
// server, through the History its bus link built for the engine; a node without a bus has
// none (it keeps its own).
func TestClusterBusHistory(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	off, err := newClusterBus(config.Config{}, metrics.New("herald_", nil), log).start()
	if err != nil || off.store() != nil {
		t.Fatalf("without a bus: start %v, history %v; want no error and no history", err, off.store())
	}
	for _, engine := range []string{"nats", "redis"} {
		t.Run(engine, func(t *testing.T) {
			srv := servicetest.Redis
			if engine == "nats" {
				srv = servicetest.NATSJetStream
			}
			var cfg config.Config
			cfg.Cluster = config.ClusterConfig{URL: srv(t).URL(), NodeID: "n1", Prefix: "herald"}
			b := newClusterBus(cfg, metrics.New("herald_", nil), log)
			c, err := b.start()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			defer b.stop(ctx)
			poll.Until(t, 30*time.Second, "the bus to connect", func() (bool, string) { return c.broker().Connected(), "not connected" })
			h := c.store()
			if h == nil {
				t.Fatal("no history on a bus")
			}
			rule := herald.HistoryRule{Channels: "auction-*", Size: 10, TTL: time.Minute}
			p, err := h.Publish(ctx, rule, herald.BusMessage{Kind: herald.BusEvent, App: "1", Channel: "auction-1", Payload: []byte("bid")})
			if err != nil || p.Offset != 1 {
				t.Fatalf("Publish: %+v, %v; want offset 1", p, err)
			}
			page, err := h.Read(ctx, rule, "1", "auction-1", 0, 10)
			if err != nil || page.Latest != p || len(page.Entries) != 1 || string(page.Entries[0].Frame) != "bid" {
				t.Fatalf("Read: %+v, %v; want the event at %+v", page, err, p)
			}
		})
	}
}
