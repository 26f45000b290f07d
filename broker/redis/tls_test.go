package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// aclRules are the rules docs/security.md gives herald's Redis user: the cluster's channels
// and keys, the commands herald runs, nothing else.
const aclRules = "resetchannels &herald.* &test.* resetkeys ~herald.* ~test.* -@all +@connection +publish +subscribe +unsubscribe +evalsha +eval +hget +hset +hincrby +del +xadd +xrange +pexpire +time"

// tlsServer starts a Redis that speaks TLS only, verifies clients' certificates and knows one
// user, herald (password pw), with aclRules; the default user is off.
func tlsServer(t *testing.T) (*servicetest.Server, *servicetest.CA, broker.TLSFiles) {
	t.Helper()
	ca := servicetest.NewCA(t)
	srv := servicetest.RedisTLS(t, ca, append([]string{"--user", "default", "off", "--user"}, strings.Fields("herald on >pw "+aclRules)...)...)
	cert, key := ca.Issue(t, "herald-node", true)
	return srv, ca, broker.TLSFiles{CA: ca.CertFile, Cert: cert, Key: key}
}

func tlsURL(srv *servicetest.Server, userinfo string) string {
	if userinfo == "" {
		return "rediss://" + srv.Addr() + "/0"
	}
	return "rediss://" + userinfo + "@" + srv.Addr() + "/0"
}

// logBuffer is a log's text, written by the engine's goroutines and read by the test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTLSAndACL runs the bus's contract on a Redis reached over TLS with a client
// certificate, as an ACL user with only the rules docs/security.md gives, with a cluster
// secret and encryption: every command herald runs (the history scripts' included) is allowed
// to that user.
func TestTLSAndACL(t *testing.T) {
	srv, _, files := tlsServer(t)
	tc, err := files.Config("")
	if err != nil {
		t.Fatal(err)
	}
	auth := broker.AuthConfig{Secret: testSecret, Encrypt: true}
	brokertest.Run(t, func(t testing.TB, nodes []brokertest.Node) brokertest.Cluster {
		c := brokertest.Cluster{Stop: srv.Stop, Start: srv.Start}
		prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
		for _, n := range nodes {
			b, err := redis.New(redis.Config{URL: tlsURL(srv, "herald:pw"), Common: broker.Common{NodeID: n.ID,
				Prefix: prefix, RoundTrip: n.RoundTrip, TLS: tc, Auth: auth, QueueSize: n.QueueSize}}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			c.Brokers = append(c.Brokers, b)
		}
		return c
	})
	t.Run("History", func(t *testing.T) {
		got := make(chan herald.BusMessage, 4)
		b, err := redis.New(redis.Config{URL: tlsURL(srv, "herald:pw"), Common: broker.Common{NodeID: "n1", TLS: tc, Auth: auth}},
			func(m herald.BusMessage) { got <- m })
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), brokertest.Wait)
		defer cancel()
		if err := b.Subscribe(ctx, "app", "h"); err != nil {
			t.Fatal(err)
		}
		h := redis.NewHistory(b)
		rule := herald.HistoryRule{Channels: "*", Size: 10, TTL: time.Minute}
		frame := []byte("\x81\x02hi")
		p, err := h.Publish(ctx, rule, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "h", Payload: frame})
		if err != nil {
			t.Fatalf("history publish as the ACL user: %v", err)
		}
		page, err := h.Read(ctx, rule, "app", "h", 0, 10)
		if err != nil || len(page.Entries) != 1 || !bytes.Equal(page.Entries[0].Frame, frame) || page.Latest != p {
			t.Fatalf("read: %+v, %v", page, err)
		}
		select {
		case m := <-got:
			if m.Offset != p.Offset || !bytes.Equal(m.Payload, frame) {
				t.Fatalf("received %+v", m)
			}
		case <-ctx.Done():
			t.Fatal("the history event was not received")
		}
	})
}

// TestTLSRefused: a node that cannot prove itself to the TLS Redis (no client certificate, a
// CA that is not the server's, a wrong password) never connects, and its error says why.
func TestTLSRefused(t *testing.T) {
	srv, _, files := tlsServer(t)
	other := servicetest.NewCA(t)
	otherCert, otherKey := other.Issue(t, "stranger", true)
	for _, c := range []struct {
		name, userinfo string
		files          broker.TLSFiles
	}{
		{"no client certificate", "herald:pw", broker.TLSFiles{CA: files.CA}},
		{"the server's CA not trusted", "herald:pw", broker.TLSFiles{CA: other.CertFile, Cert: files.Cert, Key: files.Key}},
		{"a client certificate of another CA", "herald:pw", broker.TLSFiles{CA: files.CA, Cert: otherCert, Key: otherKey}},
		{"a wrong password", "herald:nope", files},
		{"the default user", "", files},
	} {
		t.Run(c.name, func(t *testing.T) {
			tc, err := c.files.Config("")
			if err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			b, err := redis.New(redis.Config{URL: tlsURL(srv, c.userinfo),
				Common: broker.Common{NodeID: "n1", TLS: tc, Timeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}},
				func(herald.BusMessage) {})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())
			poll.Until(t, brokertest.Wait, "the refusal to be logged", func() (bool, string) {
				return strings.Contains(logs.String(), "cluster bus unreachable"), logs.String()
			})
			if b.Connected() {
				t.Fatal("connected")
			}
		})
	}
}
