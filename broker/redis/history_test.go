package redis_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/historytest"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/redis/rueidis"
)

func TestHistoryConformance(t *testing.T) {
	historytest.Run(t, newHistoryCluster(servicetest.Redis(t)))
}

// TestHistoryConformanceSecret: the contract holds with a cluster secret, events kept and
// published sealed (and encrypted).
func TestHistoryConformanceSecret(t *testing.T) {
	srv := servicetest.Redis(t)
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
		c := historytest.Cluster{Ordered: true, Stop: srv.Stop, Start: srv.Start, Lose: func(t testing.TB) { flushAll(t, srv) }}
		prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
		var brokers []*redis.Broker
		for _, n := range nodes {
			b, err := redis.New(redis.Config{URL: srv.URL(), Common: broker.Common{NodeID: n.ID, Prefix: prefix, Auth: auth}}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			brokers = append(brokers, b)
			c.Brokers = append(c.Brokers, b)
			c.Histories = append(c.Histories, redis.NewHistory(b))
		}
		c.Reopen = func(_ testing.TB, i int) herald.History { return redis.NewHistory(brokers[i]) }
		return c
	}
}

func flushAll(t testing.TB, srv *servicetest.Server) {
	t.Helper()
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), historytest.Wait)
	defer cancel()
	if err := admin.Do(ctx, admin.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkHistoryPublish(b *testing.B) {
	historytest.BenchmarkPublish(b, newHistoryCluster(servicetest.Redis(b)))
}

// TestHistoryKeys: the script publishes exactly the bytes broker.AppendMessage writes for the
// message with its position, and keeps a channel's history in two keys of one hash slot
// under the prefix, the stream expiring after the rule's TTL and the meta hash after MetaTTL.
func TestHistoryKeys(t *testing.T) {
	srv := servicetest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), historytest.Wait)
	defer cancel()
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	raw := make(chan string, 1)
	sub, cancelSub := admin.Dedicate()
	defer cancelSub()
	sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) { raw <- m.Message }})
	subject := broker.Subject("pfx", "app", "a.b{c}")
	if err := sub.Do(ctx, sub.B().Subscribe().Channel(subject).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	b, err := redis.New(redis.Config{URL: srv.URL(), Common: broker.Common{NodeID: "n1", Prefix: "pfx"}}, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	r := herald.HistoryRule{Channels: "*", Size: 10, TTL: 90 * time.Second}
	m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "a.b{c}", ExcludeSocket: "1.2", Origin: 77, Payload: []byte("\x81\x03abc")}
	p, err := redis.NewHistory(b).Publish(ctx, r, m)
	if err != nil {
		t.Fatal(err)
	}
	m.Node, m.Epoch, m.Offset = "n1", p.Epoch, p.Offset
	select {
	case got := <-raw:
		if want := string(broker.AppendMessage(nil, m)); got != want {
			t.Errorf("published %q, want %q", got, want)
		}
	case <-ctx.Done():
		t.Fatal("nothing published")
	}
	keys, err := admin.Do(ctx, admin.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{"pfx.history.{app.a%2Eb%7Bc%7D}.meta", "pfx.history.{app.a%2Eb%7Bc%7D}.stream"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	for i, ttl := range []time.Duration{redis.MetaTTL, r.TTL} {
		got, err := admin.Do(ctx, admin.B().Pttl().Key(keys[i]).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Duration(got) * time.Millisecond; d > ttl || d < ttl-time.Minute {
			t.Errorf("%s expires in %v, want %v", keys[i], d, ttl)
		}
	}
}
