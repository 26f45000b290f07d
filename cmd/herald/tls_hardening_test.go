package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTLSOffersAEADOnly: the public port offers TLS 1.2 clients only ECDHE suites with an
// AEAD cipher: a client that offers nothing but a CBC suite with SHA-1 (ECDHE-ECDSA-AES128-SHA)
// is refused, and of every TLS 1.2 suite Go knows, offered one at a time, exactly the AEAD ones
// for the certificate's key (ECDSA here) are accepted. TLS 1.3 is served.
func TestTLSOffersAEADOnly(t *testing.T) {
	tn := startTLSNode(t)
	dial := func(cfg *tls.Config) (*tls.Conn, error) {
		d := &net.Dialer{Timeout: 10 * time.Second}
		return tls.DialWithDialer(d, "tcp", tn.api, cfg)
	}
	cbc := tn.ca.ClientConfig()
	cbc.MaxVersion = tls.VersionTLS12
	cbc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
	if c, err := dial(cbc); err == nil {
		c.Close()
		t.Fatal("a TLS 1.2 client offering only ECDHE-ECDSA-AES128-SHA (CBC, SHA-1) was served")
	} else if !strings.Contains(err.Error(), "handshake failure") {
		t.Fatalf("CBC refused with %v; want a handshake failure alert", err)
	}

	var offered []string
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			continue
		}
		cfg := tn.ca.ClientConfig()
		cfg.MaxVersion = tls.VersionTLS12
		cfg.CipherSuites = []uint16{s.ID}
		c, err := dial(cfg)
		if err != nil {
			continue
		}
		if got := c.ConnectionState().CipherSuite; got != s.ID {
			t.Errorf("offered only %s, the handshake chose %s", s.Name, tls.CipherSuiteName(got))
		}
		c.Close()
		offered = append(offered, s.Name)
	}
	t.Logf("TLS 1.2 suites the port accepts: %s", strings.Join(offered, ", "))
	want := []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"}
	slices.Sort(offered)
	if !slices.Equal(offered, want) {
		t.Errorf("TLS 1.2 suites accepted: %v; want the AEAD ones only: %v", offered, want)
	}

	c, err := dial(tn.ca.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("a default client got TLS version %x, want TLS 1.3", v)
	}
}

// TestTLSHandshakeFailuresRateLimited: 300 plain HTTP requests to the TLS port fail their
// handshakes; each is counted (herald_tls_handshake_failures_total reaches 300) but the log
// gets a handful of lines for them (one every 10 s at most), not 300.
func TestTLSHandshakeFailuresRateLimited(t *testing.T) {
	tn := startTLSNode(t)
	const conns = 300
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	sem := make(chan struct{}, 16)
	for range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", tn.api, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(c)
			if !strings.Contains(string(b), "400 Bad Request") {
				errs <- fmt.Errorf("plain HTTP to the TLS port answered %q; want net/http's 400", b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitMetric(t, tn.node, "tls_handshake_failures_total", func(v float64) bool { return v == conns })
	lines := strings.Count(tn.logs.String(), "TLS handshake")
	// One line at the first failure, then at most one per 10 s of the run.
	most := 1 + int(time.Since(start)/(10*time.Second)) + 1
	if lines < 1 || lines > most {
		t.Fatalf("%d log lines for %d failed handshakes in %v; want 1 to %d:\n%s", lines, conns, time.Since(start), most, tn.logs.String())
	}
	if !strings.Contains(tn.logs.String(), `"tls_handshake_failures_total"`) {
		t.Fatalf("the handshake warning does not carry the count:\n%s", tn.logs.String())
	}
	t.Logf("%d failed handshakes: %d log lines in %v", conns, lines, time.Since(start).Round(time.Millisecond))
}
