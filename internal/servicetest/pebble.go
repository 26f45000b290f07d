package servicetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PebbleVersion is the ACME test server the TLS tests run: Let's Encrypt's pebble, and its
// challenge test server as the DNS resolver it asks, built from the Go module proxy once and
// cached (like Kafka's jars).
const PebbleVersion = "v2.10.3"

// Pebble is a running ACME CA for tests: pebble, validating challenges for real against a
// name its own DNS server resolves to 127.0.0.1.
type Pebble struct {
	Directory string // the ACME directory URL
	CAFile    string // PEM root pebble's HTTPS is signed with (tls.acme.ca_file)
	mgmt      string // pebble's management address, which serves the issuing roots
	client    *http.Client
}

// StartPebble runs pebble and its DNS server on free ports; pebble checks TLS-ALPN-01
// challenges on 127.0.0.1:tlsPort, where every name resolves. Without the go command it
// fails the test (under -short it skips).
func StartPebble(t testing.TB, tlsPort int) *Pebble {
	t.Helper()
	bin, src := pebbleBinaries(t)
	dir := t.TempDir()
	dnsPort, dnsMgmt, acmePort, mgmtPort := freePort(t), freePort(t), freePort(t), freePort(t)

	dns := &process{name: "pebble-challtestsrv", dir: dir, tail: 2000, every: 20 * time.Millisecond}
	t.Cleanup(dns.kill)
	if err := dns.run(dnsPort, Ready, func() error { return dial(fmt.Sprintf("127.0.0.1:%d", dnsMgmt)) },
		filepath.Join(bin, "pebble-challtestsrv"), "-http01", "", "-https01", "", "-doh", "", "-tlsalpn01", "",
		"-dnsserver", fmt.Sprintf("127.0.0.1:%d", dnsPort), "-management", fmt.Sprintf("127.0.0.1:%d", dnsMgmt),
		"-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""); err != nil {
		t.Fatal(err)
	}

	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":                  fmt.Sprintf("127.0.0.1:%d", acmePort),
		"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", mgmtPort),
		"certificate":                    filepath.Join(src, "test/certs/localhost/cert.pem"),
		"privateKey":                     filepath.Join(src, "test/certs/localhost/key.pem"),
		"httpPort":                       freePort(t), // no HTTP-01 here: herald answers TLS-ALPN-01 only
		"tlsPort":                        tlsPort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
	}}
	b, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(dir, "pebble-config.json")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Pebble{Directory: fmt.Sprintf("https://127.0.0.1:%d/dir", acmePort), CAFile: filepath.Join(src, "test/certs/pebble.minica.pem"),
		mgmt: fmt.Sprintf("127.0.0.1:%d", mgmtPort)}
	roots := x509.NewCertPool()
	pemBytes, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM(pemBytes)
	p.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}
	ca := &process{name: "pebble", dir: dir, tail: 4000, every: 20 * time.Millisecond,
		env: []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"}}
	t.Cleanup(ca.kill)
	probe := func() error {
		resp, err := p.client.Get(p.Directory)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("directory: %d", resp.StatusCode)
		}
		return nil
	}
	if err := ca.run(acmePort, Ready, probe, filepath.Join(bin, "pebble"), "-config", cfgFile,
		"-dnsserver", fmt.Sprintf("127.0.0.1:%d", dnsPort), "-strict=false"); err != nil {
		t.Fatal(err)
	}
	return p
}

// Roots returns the roots pebble issues certificates under (they are made at its start).
func (p *Pebble) Roots(t testing.TB) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	for _, path := range []string{"/roots/0", "/intermediates/0"} {
		resp, err := p.client.Get("https://" + p.mgmt + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !pool.AppendCertsFromPEM(b) {
			t.Fatalf("pebble %s: no certificate in %q", path, b)
		}
	}
	return pool
}

// pebbleBinaries returns the directory holding pebble and pebble-challtestsrv, built once
// into the user's cache, and pebble's module source (for its test certificates).
func pebbleBinaries(t testing.TB) (bin, src string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if testing.Short() {
			t.Skip("no go command to build pebble (-short: skipping)")
		}
		t.Fatal("no go command to build pebble with")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin = filepath.Join(cache, "herald-pebble", PebbleVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, cmd := range []string{"pebble", "pebble-challtestsrv"} {
		if fileExists(filepath.Join(bin, cmd)) {
			continue
		}
		c := exec.CommandContext(ctx, goBin, "install", "github.com/letsencrypt/pebble/v2/cmd/"+cmd+"@"+PebbleVersion)
		c.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod")
		c.Dir = os.TempDir() // outside herald's module
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go install %s@%s: %v\n%s", cmd, PebbleVersion, err, out)
		}
	}
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	src = filepath.Join(strings.TrimSpace(string(out)), "github.com/letsencrypt/pebble/v2@"+PebbleVersion)
	if !fileExists(filepath.Join(src, "test/certs/pebble.minica.pem")) {
		// The binaries were cached but the module cache was cleaned: fetch the source again.
		c := exec.CommandContext(ctx, goBin, "mod", "download", "github.com/letsencrypt/pebble/v2@"+PebbleVersion)
		c.Dir = os.TempDir()
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go mod download pebble: %v\n%s", err, out)
		}
	}
	return bin, src
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err
}
