package main

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
)

// TestACMEServe: with tls.acme.* a node gets its certificate from an ACME CA (pebble, run by
// the test, which checks the TLS-ALPN-01 challenge on the node's own port for real, the name
// resolving to 127.0.0.1 through pebble's DNS server), serves it to a wss:// client that
// trusts the CA's roots only, and keeps it in its cache directory.
func TestACMEServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs pebble")
	}
	const domain = "herald.test"
	port := freePort(t)
	ca := servicetest.StartPebble(t, port)
	cache := filepath.Join(t.TempDir(), "acme")
	n := startServe(t, "acme", "--port", strconv.Itoa(port), "--tls-acme-domains", domain, "--tls-acme-email", "ops@"+domain,
		"--tls-acme-directory", ca.Directory, "--tls-acme-ca-file", ca.CAFile, "--tls-acme-cache-dir", cache)
	n.api = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	roots := ca.Roots(t)
	cfg := &tls.Config{RootCAs: roots, ServerName: domain, MinVersion: tls.VersionTLS12}
	var conn *tls.Conn
	// The first handshake waits while the node gets its certificate (an account, an order,
	// the challenge): seconds, not milliseconds.
	poll.NoError(t, 2*clusterWait, "a handshake with the ACME certificate", func() error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", n.api, cfg)
		if err != nil {
			return err
		}
		conn = c
		return nil
	})
	leaf := conn.ConnectionState().PeerCertificates[0]
	if err := leaf.VerifyHostname(domain); err != nil {
		t.Fatal(err)
	}
	c, err := wstest.Handshake(conn, domain, "/app/"+restApp.Key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SocketID(clusterWait); err != nil {
		t.Fatalf("wss with the ACME certificate: %v", err)
	}
	entries, err := os.ReadDir(cache)
	found := false
	for _, e := range entries {
		found = found || e.Name() == domain
	}
	if err != nil || !found {
		t.Fatalf("cache dir %s holds %v (%v); want the certificate of %s", cache, entries, err, domain)
	}
}
