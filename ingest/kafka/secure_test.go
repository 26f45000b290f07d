package kafka_test

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/ingest/kafka"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestSecured consumes from a broker (a real one, of its own) over TLS with a client
// certificate of the test's CA, and over TLS with SASL: PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512; a wrong password, or no client certificate, gets nothing and says why.
func TestSecured(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kafka broker")
	}
	ca := servicetest.NewCA(t)
	cert, key := ca.Issue(t, "kafka-broker", false)
	store := filepath.Join(t.TempDir(), "broker.pem")
	var pem []byte
	for _, f := range []string{key, cert} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pem = append(pem, b...)
	}
	if err := os.WriteFile(store, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := servicetest.StartKafkaSecure(servicetest.KafkaSecurity{KeyStore: store, TrustStore: ca.CertFile,
		Users: map[string]string{"herald": "s3cret-pw"}})
	if errors.Is(err, servicetest.ErrNoJava) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	cl := admin(t, k)
	clientCert, clientKey := ca.Issue(t, "herald", true)
	withCert, serverOnly := ca.ClientTLS(t, clientCert, clientKey), ca.ClientTLS(t, "", "")
	for _, c := range []struct {
		name   string
		addr   string
		tls    *tls.Config
		sasl   kafka.SASL
		refuse string // what the source's error says when it must not consume; empty: it consumes
	}{
		{"client certificate", k.SSLAddr(), withCert, kafka.SASL{}, ""},
		{"PLAIN", k.SASLAddr(), serverOnly, kafka.SASL{Mechanism: "PLAIN", User: "herald", Password: "s3cret-pw"}, ""},
		{"SCRAM-SHA-256", k.SASLAddr(), serverOnly, kafka.SASL{Mechanism: "SCRAM-SHA-256", User: "herald", Password: "s3cret-pw"}, ""},
		{"SCRAM-SHA-512", k.SASLAddr(), serverOnly, kafka.SASL{Mechanism: "SCRAM-SHA-512", User: "herald", Password: "s3cret-pw"}, ""},
		{"wrong password", k.SASLAddr(), serverOnly, kafka.SASL{Mechanism: "SCRAM-SHA-512", User: "herald", Password: "nope"}, "SASL"},
		{"no client certificate", k.SSLAddr(), serverOnly, kafka.SASL{}, "certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic, group := unique(t, "topic"), unique(t, "group")
			createTopic(t, cl, topic, 1)
			produce(t, cl, topic, 0, rec("a", 0), rec("a", 1), rec("a", 2))
			cfg := config(k, topic, group)
			cfg.Brokers, cfg.TLS, cfg.SASL = []string{c.addr}, c.tls, c.sasl
			sink := &ingesttest.Sink{}
			s, err := kafka.New(cfg, ingesttest.Pipeline(t, "kafka", "{value.ch}", "e", "{value.seq}", sink))
			if err != nil {
				t.Fatal(err)
			}
			s.Start()
			t.Cleanup(func() { ingesttest.Stop(t, s) })
			if c.refuse != "" {
				waitFor(t, "the source to report "+c.refuse, func() bool { return strings.Contains(s.Stats().Error, c.refuse) })
				if n := len(sink.Events()); n != 0 || s.Stats().State == ingest.StateUp {
					t.Fatalf("%d events consumed, state %v", n, s.Stats().State)
				}
				return
			}
			waitFor(t, "the records", func() bool { return len(sink.Events()) == 3 })
		})
	}
}
