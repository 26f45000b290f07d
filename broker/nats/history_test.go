package nats_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/historytest"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestHistoryConformance(t *testing.T) {
	historytest.Run(t, newHistoryCluster(servicetest.NATSJetStream(t)))
}

// TestHistoryConformanceSecret: the contract holds with a cluster secret, events kept and
// published sealed (and encrypted).
func TestHistoryConformanceSecret(t *testing.T) {
	srv := servicetest.NATSJetStream(t)
	for _, enc := range []bool{false, true} {
		t.Run("encrypt="+strconv.FormatBool(enc), func(t *testing.T) {
			historytest.Run(t, newSecretHistoryCluster(srv, broker.AuthConfig{Secret: testSecret, Encrypt: enc}))
		})
	}
}

func newHistoryCluster(srv *servicetest.Server) historytest.NewCluster {
	return newSecretHistoryCluster(srv, broker.AuthConfig{})
}

func newSecretHistoryCluster(srv *servicetest.Server, auth broker.AuthConfig) historytest.NewCluster {
	return func(t testing.TB, nodes []historytest.Node) historytest.Cluster {
		c := historytest.Cluster{Stop: srv.Stop, Start: srv.Start, Lose: func(t testing.TB) { deleteStreams(t, srv) }}
		prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
		var brokers []*nats.Broker
		for _, n := range nodes {
			b, err := nats.New(nats.Config{URL: srv.URL(), Common: broker.Common{NodeID: n.ID, Prefix: prefix, Auth: auth}}, n.Handler)
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

// TestHistoryStream: a rule's stream follows the rule (a History that publishes under a
// changed Size or TTL updates it), and a server without JetStream fails publishes at once
// with CodeUnavailable.
func TestHistoryStream(t *testing.T) {
	srv := servicetest.NATSJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), historytest.Wait)
	defer cancel()
	b, err := nats.New(nats.Config{URL: srv.URL(), Common: broker.Common{NodeID: "n1"}}, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "a.b", Payload: []byte("x")}
	for _, r := range []herald.HistoryRule{{Channels: "a.*", Size: 5, TTL: time.Hour}, {Channels: "a.*", Size: 3, TTL: time.Minute}} {
		if _, err := newHistory(t, b).Publish(ctx, r, m); err != nil {
			t.Fatal(err)
		}
		nc, err := natsgo.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		var found []jetstream.StreamConfig
		for s := range js.ListStreams(ctx).Info() {
			found = append(found, s.Config)
		}
		nc.Close()
		if len(found) != 1 || found[0].MaxMsgsPerSubject != int64(r.Size) || found[0].MaxAge != r.TTL ||
			len(found[0].Subjects) != 1 || !strings.HasPrefix(found[0].Subjects[0], "herald.history.") {
			t.Fatalf("streams after a publish under %+v: %+v; want one, of that size and TTL, on herald.history.*", r, found)
		}
	}

	plain := servicetest.NATS(t)
	pb, err := nats.New(nats.Config{URL: plain.URL(), Common: broker.Common{NodeID: "n1"}}, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close(context.Background())
	poll.Until(t, historytest.Wait, "the broker to connect", func() (bool, string) { return pb.Connected(), "not connected" })
	t0 := time.Now()
	_, err = newHistory(t, pb).Publish(ctx, herald.HistoryRule{Channels: "*", Size: 1, TTL: time.Hour}, m)
	if herald.CodeOf(err) != herald.CodeUnavailable || !strings.Contains(err.Error(), "JetStream") || time.Since(t0) > 5*time.Second {
		t.Errorf("Publish without JetStream: %v after %v; want a CodeUnavailable error that says so, at once", err, time.Since(t0))
	}
}
