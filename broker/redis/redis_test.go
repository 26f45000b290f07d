package redis_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/redis/rueidis"
)

func TestConformance(t *testing.T) {
	srv := servicetest.Redis(t)
	brokertest.Run(t, newCluster(srv))
}

// TestConformanceSecret: the contract holds with a cluster secret, messages sealed (and
// encrypted).
func TestConformanceSecret(t *testing.T) {
	srv := servicetest.Redis(t)
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
			b, err := redis.New(redis.Config{URL: srv.URL(), Common: broker.Common{NodeID: n.ID,
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
	brokertest.BenchmarkPublish(b, newCluster(servicetest.Redis(b)))
}

func BenchmarkPublishFlush(b *testing.B) {
	brokertest.BenchmarkPublishFlush(b, newCluster(servicetest.Redis(b)))
}

// TestFlushReportsRefusedPublish: a PUBLISH that Redis refuses (here the ACL forbids it)
// makes the Flush after it fail, and is counted.
func TestFlushReportsRefusedPublish(t *testing.T) {
	srv := servicetest.Redis(t)
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), brokertest.Wait)
	defer cancel()
	acl := admin.B().Arbitrary("ACL", "SETUSER", "mute", "on", "nopass", "allchannels", "+@all", "-publish").Build()
	if err := admin.Do(ctx, acl).Error(); err != nil {
		t.Fatal(err)
	}
	b, err := redis.New(redis.Config{URL: "redis://mute@" + srv.Addr(), Common: broker.Common{NodeID: "node0"}}, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	if !b.Connected() {
		t.Fatal("not connected")
	}
	if err := b.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: []byte("x")}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	err = b.Flush(ctx)
	t.Logf("Flush: %v", err)
	if herald.CodeOf(err) != herald.CodeUnavailable {
		t.Fatalf("Flush after a refused PUBLISH returned %v; want a CodeUnavailable error", err)
	}
	if s := b.Stats(); s.PublishErrors != 1 {
		t.Errorf("PublishErrors = %d, want 1", s.PublishErrors)
	}
}
