package nats_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/servicetest"
)

func TestConformance(t *testing.T) {
	srv := servicetest.NATS(t)
	brokertest.Run(t, newCluster(srv))
}

func newCluster(srv *servicetest.Server) brokertest.NewCluster {
	return func(t testing.TB, nodes []brokertest.Node) brokertest.Cluster {
		c := brokertest.Cluster{Stop: srv.Stop, Start: srv.Start}
		prefix := clusters.Add(1)
		for _, n := range nodes {
			b, err := nats.New(nats.Config{URL: srv.URL(), NodeID: n.ID, Prefix: "test." + strconv.FormatInt(prefix, 10)}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			c.Brokers = append(c.Brokers, b)
		}
		return c
	}
}

// clusters numbers the clusters of one test binary, so each has its own subjects.
var clusters atomic.Int64

func BenchmarkPublish(b *testing.B) {
	brokertest.BenchmarkPublish(b, newCluster(servicetest.NATS(b)))
}

// TestStartWithoutServer: a node whose bus is down when it starts reports it, fails
// publishes promptly, and connects (with the interests it took meanwhile) once the
// server is there.
func TestStartWithoutServer(t *testing.T) {
	srv := servicetest.NATS(t)
	srv.Stop(t)
	got := make(chan herald.BusMessage, 1)
	b, err := nats.New(nats.Config{URL: srv.URL(), NodeID: "late"}, func(m herald.BusMessage) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if b.Connected() {
		t.Fatal("connected with no server")
	}
	if err := b.Publish(context.Background(), herald.BusMessage{App: "a", Channel: "c"}); herald.CodeOf(err) != herald.CodeUnavailable {
		t.Fatalf("Publish with no server = %v, want CodeUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Subscribe(ctx, "a", "c"); err == nil {
		t.Fatal("Subscribe with no server returned nil")
	}
	srv.Start(t)
	other, err := nats.New(nats.Config{URL: srv.URL(), NodeID: "other"}, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	deadline := time.Now().Add(brokertest.Wait)
	for {
		_ = other.Publish(context.Background(), herald.BusMessage{Kind: herald.BusEvent, App: "a", Channel: "c", Payload: []byte("x")})
		select {
		case m := <-got:
			if m.Node != "other" {
				t.Errorf("received %+v", m)
			}
			return
		case <-time.After(20 * time.Millisecond): // probe interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message %v after the server started; connected %v, %+v", brokertest.Wait, b.Connected(), b.Stats())
		}
	}
}
