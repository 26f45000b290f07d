package nats_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// heraldPermissions are what docs/security.md gives herald's NATS user: the cluster's
// subjects (test.> for the tests' prefixes), the JetStream API and reply inboxes.
const heraldPermissions = `{publish: ["herald.>", "test.>", "$JS.API.>"], subscribe: ["herald.>", "test.>", "_INBOX.>"]}`

// tlsBlock is a nats-server tls block with a certificate of ca, verifying clients' when verify.
func tlsBlock(t *testing.T, ca *servicetest.CA, verify bool) string {
	cert, key := ca.Issue(t, "nats-server", false)
	return fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: %v\n}\n", cert, key, ca.CertFile, verify)
}

// writeTemp writes content to a new file of the test and returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTLSUsers runs the bus's contract, and the history's publish and read, on a NATS server
// that requires TLS with a client certificate and a user: with a password, and with an nkey,
// each limited to the permissions docs/security.md gives; with a cluster secret.
func TestTLSUsers(t *testing.T) {
	ca := servicetest.NewCA(t)
	nkey, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := nkey.PublicKey()
	seed, _ := nkey.Seed()
	seedFile := writeTemp(t, "herald.nk", string(seed)+"\n")
	srv := servicetest.NATSConf(t, tlsBlock(t, ca, true)+fmt.Sprintf(`authorization {
  users: [
    {user: herald, password: pw, permissions: %[1]s}
    {nkey: %[2]s, permissions: %[1]s}
  ]
}`, heraldPermissions, pub), true)
	cert, key := ca.Issue(t, "herald-node", true)
	tc, err := broker.TLSFiles{CA: ca.CertFile, Cert: cert, Key: key}.Config("")
	if err != nil {
		t.Fatal(err)
	}
	auth := broker.AuthConfig{Secret: testSecret, Encrypt: true}
	for _, c := range []struct {
		name string
		cfg  func(nats.Config) nats.Config
	}{
		{"password", func(c nats.Config) nats.Config { c.URL = "tls://herald:pw@" + srv.Addr(); return c }},
		{"nkey", func(c nats.Config) nats.Config { c.URL = "nats://" + srv.Addr(); c.NKeySeedFile = seedFile; return c }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func(t testing.TB, id string, h herald.BusHandler) *nats.Broker {
				b, err := nats.New(c.cfg(nats.Config{Common: broker.Common{NodeID: id, Prefix: "test." + strconv.FormatInt(clusters.Add(1), 10),
					TLS: tc, Auth: auth}}), h)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close(context.Background()) })
				return b
			}
			if c.name == "password" {
				brokertest.Run(t, func(t testing.TB, nodes []brokertest.Node) brokertest.Cluster {
					cl := brokertest.Cluster{Stop: srv.Stop, Start: srv.Start}
					prefix := "test." + strconv.FormatInt(clusters.Add(1), 10)
					for _, n := range nodes {
						b, err := nats.New(c.cfg(nats.Config{Common: broker.Common{NodeID: n.ID, Prefix: prefix, RoundTrip: n.RoundTrip,
							TLS: tc, Auth: auth, QueueSize: n.QueueSize}}), n.Handler)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { _ = b.Close(context.Background()) })
						cl.Brokers = append(cl.Brokers, b)
					}
					return cl
				})
			}
			got := make(chan herald.BusMessage, 4)
			b := mk(t, "n1", func(m herald.BusMessage) { got <- m })
			poll.Until(t, brokertest.Wait, "the broker to connect", func() (bool, string) { return b.Connected(), "not connected" })
			checkHistory(t, b, got)
		})
	}
}

// checkHistory publishes a history event through b and reads it back, and waits for b's
// handler (got) to receive it.
func checkHistory(t *testing.T, b *nats.Broker, got <-chan herald.BusMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), brokertest.Wait)
	defer cancel()
	if err := b.Subscribe(ctx, "app", "h"); err != nil {
		t.Fatal(err)
	}
	h, err := nats.NewHistory(b)
	if err != nil {
		t.Fatal(err)
	}
	rule := herald.HistoryRule{Channels: "*", Size: 10, TTL: time.Minute}
	frame := []byte("\x81\x02hi")
	p, err := h.Publish(ctx, rule, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "h", Payload: frame})
	if err != nil {
		t.Fatalf("history publish: %v", err)
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
}

// exchange checks that a message b1 publishes reaches b2.
func exchange(t *testing.T, b1, b2 *nats.Broker, got <-chan herald.BusMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), brokertest.Wait)
	defer cancel()
	if err := b2.Subscribe(ctx, "app", "ch"); err != nil {
		t.Fatal(err)
	}
	if err := b1.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.Node != "n1" || string(m.Payload) != "x" {
			t.Fatalf("received %+v", m)
		}
	case <-ctx.Done():
		t.Fatal("nothing received")
	}
}

// pair returns two brokers made by mk, the second's messages on got.
func pair(t *testing.T, mk func(id string, h herald.BusHandler) (*nats.Broker, error)) (*nats.Broker, *nats.Broker, <-chan herald.BusMessage) {
	t.Helper()
	got := make(chan herald.BusMessage, 4)
	var bs []*nats.Broker
	for i, h := range []herald.BusHandler{func(herald.BusMessage) {}, func(m herald.BusMessage) { got <- m }} {
		b, err := mk("n"+strconv.Itoa(i+1), h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		poll.Until(t, brokertest.Wait, "the broker to connect", func() (bool, string) { return b.Connected(), "not connected" })
		bs = append(bs, b)
	}
	return bs[0], bs[1], got
}

// TestTLSToken: a NATS server over TLS that takes a token.
func TestTLSToken(t *testing.T) {
	ca := servicetest.NewCA(t)
	srv := servicetest.NATSConf(t, tlsBlock(t, ca, false)+`authorization { token: "s3cret-token" }`, false)
	tc, err := broker.TLSFiles{CA: ca.CertFile}.Config("")
	if err != nil {
		t.Fatal(err)
	}
	b1, b2, got := pair(t, func(id string, h herald.BusHandler) (*nats.Broker, error) {
		return nats.New(nats.Config{URL: "tls://s3cret-token@" + srv.Addr(), Common: broker.Common{NodeID: id, TLS: tc, Auth: broker.AuthConfig{Secret: testSecret}}}, h)
	})
	exchange(t, b1, b2, got)
	refused(t, nats.Config{URL: "tls://wrong-token@" + srv.Addr(), Common: broker.Common{NodeID: "n3", TLS: tc}})
}

// TestCredsFile: a NATS server with decentralized auth (an operator, an account, a user
// JWT), the node authenticated by a .creds file.
func TestCredsFile(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	userJWT, err := jwt.NewUserClaims(userPub).Encode(acc)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := writeTemp(t, "herald.creds", string(creds))
	srv := servicetest.NATSConf(t, fmt.Sprintf("operator: %q\nresolver: MEMORY\nresolver_preload: {\n  %s: %q\n}\n",
		writeTemp(t, "op.jwt", opJWT), accPub, accJWT), false)
	b1, b2, got := pair(t, func(id string, h herald.BusHandler) (*nats.Broker, error) {
		return nats.New(nats.Config{URL: srv.URL(), CredsFile: credsFile, Common: broker.Common{NodeID: id}}, h)
	})
	exchange(t, b1, b2, got)
	refused(t, nats.Config{URL: srv.URL(), Common: broker.Common{NodeID: "n3"}})
}

// refused checks that a broker configured so never connects, and logs why.
func refused(t *testing.T, cfg nats.Config) {
	t.Helper()
	var logs logBuffer
	cfg.Timeout = 2 * time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b, err := nats.New(cfg, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	poll.Until(t, brokertest.Wait, "the refusal to be logged", func() (bool, string) {
		s := logs.String()
		return strings.Contains(s, "uthorization"), s
	})
	if b.Connected() {
		t.Fatal("connected")
	}
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
