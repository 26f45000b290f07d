package nats_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/servicetest"
)

func TestConformance(t *testing.T) {
	srv := servicetest.NATS(t)
	brokertest.Run(t, newCluster(srv))
}

// TestConformanceSecret: the contract holds with a cluster secret, messages sealed (and
// encrypted).
func TestConformanceSecret(t *testing.T) {
	srv := servicetest.NATS(t)
	for _, enc := range []bool{false, true} {
		t.Run("encrypt="+strconv.FormatBool(enc), func(t *testing.T) {
			brokertest.Run(t, newSecretCluster(srv, broker.AuthConfig{Secret: testSecret, Encrypt: enc}))
		})
	}
}

// testSecret is the cluster secret of the tests that have one.
var testSecret = []byte("0123456789abcdef0123456789abcdef")

func newCluster(srv *servicetest.Server) brokertest.NewCluster {
	return newSecretCluster(srv, broker.AuthConfig{})
}

func newSecretCluster(srv *servicetest.Server, auth broker.AuthConfig) brokertest.NewCluster {
	return func(t testing.TB, nodes []brokertest.Node) brokertest.Cluster {
		c := brokertest.Cluster{Stop: srv.Stop, Start: srv.Start}
		prefix := clusters.Add(1)
		for _, n := range nodes {
			b, err := nats.New(nats.Config{URL: srv.URL(), Common: broker.Common{NodeID: n.ID,
				Prefix: "test." + strconv.FormatInt(prefix, 10), RoundTrip: n.RoundTrip, Auth: auth, QueueSize: n.QueueSize}}, n.Handler)
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

func BenchmarkPublishFlush(b *testing.B) {
	brokertest.BenchmarkPublishFlush(b, newCluster(servicetest.NATS(b)))
}
