package nats_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/historytest"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/servicetest"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestHistoryConformance(t *testing.T) {
	historytest.Run(t, newHistoryCluster(servicetest.NATSJetStream(t)))
}

func newHistoryCluster(srv *servicetest.Server) historytest.NewCluster {
	return func(t testing.TB, nodes []historytest.Node) historytest.Cluster {
		c := historytest.Cluster{Stop: srv.Stop, Start: srv.Start, Lose: func(t testing.TB) { deleteStreams(t, srv) }}
		prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
		var brokers []*nats.Broker
		for _, n := range nodes {
			b, err := nats.New(nats.Config{URL: srv.URL(), Common: broker.Common{NodeID: n.ID, Prefix: prefix}}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			brokers = append(brokers, b)
			c.Brokers = append(c.Brokers, b)
			c.Histories = append(c.Histories, newHistory(t, b))
		}
		c.Reopen = func(t testing.TB, i int) herald.History { return newHistory(t, brokers[i]) }
		return c
	}
}

func newHistory(t testing.TB, b *nats.Broker) *nats.History {
	t.Helper()
	h, err := nats.NewHistory(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// deleteStreams deletes every stream of the server.
func deleteStreams(t testing.TB, srv *servicetest.Server) {
	t.Helper()
	nc, err := natsgo.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), historytest.Wait)
	defer cancel()
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkHistoryPublish(b *testing.B) {
	historytest.BenchmarkPublish(b, newHistoryCluster(servicetest.NATSJetStream(b)))
}
