package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/tlstest"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// tlsNode is a node serving TLS with the test's CA, and a client that trusts that CA only.
type tlsNode struct {
	*node
	ca     *tlstest.CA
	https  *http.Client
	dir    string
	leaves []tlstest.Leaf
}

func startTLSNode(t *testing.T) *tlsNode {
	t.Helper()
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	leaf := ca.Issue(t)
	cert, key := leaf.Write(t, dir)
	n := startServe(t, "tls", "--tls-cert-file", cert, "--tls-key-file", key)
	tn := &tlsNode{node: n, ca: ca, dir: dir, leaves: []tlstest.Leaf{leaf},
		https: &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(), DisableKeepAlives: true}, Timeout: 10 * time.Second}}
	poll.NoError(t, clusterWait, "https /health", func() error {
		resp, err := tn.https.Get("https://" + n.api + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return tn
}

// serial is the serial of the certificate a new handshake gets.
func (tn *tlsNode) serial(t *testing.T) string {
	t.Helper()
	c, err := tls.Dial("tcp", tn.api, tn.ca.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// wss connects a Pusher client over TLS and subscribes it to channel.
func (tn *tlsNode) wss(t *testing.T, channel string) *wstest.Client {
	t.Helper()
	nc, err := tls.Dial("tcp", tn.api, tn.ca.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := wstest.Handshake(nc, tn.api, "/app/"+restApp.Key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.SocketID(clusterWait); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(channel, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", clusterWait); err != nil {
		t.Fatal(err)
	}
	return c
}

// publish triggers "tick" on channel over https.
func (tn *tlsNode) publish(t *testing.T, channel, data string) {
	t.Helper()
	path := "/apps/" + restApp.ID + "/events"
	body, _ := json.Marshal(map[string]string{"name": "tick", "channel": channel, "data": data})
	q := pusher.SignRequest(restApp, "POST", path, nil, body, time.Now())
	resp, err := tn.https.Post("https://"+tn.api+path+"?"+q.Encode(), "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("publish over https: %d %s", resp.StatusCode, b)
	}
}

func expectTick(t *testing.T, c *wstest.Client, data string) {
	t.Helper()
	m, err := c.Expect("tick", clusterWait)
	if err != nil || m.DataString() != data {
		t.Fatalf("tick %q, %v; want %q", m.DataString(), err, data)
	}
}

// TestTLSServe: with tls.cert_file and tls.key_file the public port serves wss:// and https://
// and nothing in plain; a new certificate written over the files is served to new handshakes
// within seconds, and so is one loaded on SIGHUP (written keeping the files' size and time, so
// that only the signal tells), while a connection made before both stays open and keeps
// receiving.
func TestTLSServe(t *testing.T) {
	tn := startTLSNode(t)
	old := tn.wss(t, "tls-room")
	tn.publish(t, "tls-room", "one")
	expectTick(t, old, "one")
	if resp, err := tn.client.Get("http://" + tn.api + "/health"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && strings.Contains(string(b), `"status"`) {
			t.Fatal("the TLS port answered plain HTTP")
		}
	}

	// A new certificate written over the files.
	first := tn.serial(t)
	next := tn.ca.Issue(t)
	next.Write(t, tn.dir)
	want := fmt.Sprint(next.Serial)
	poll.NoError(t, clusterWait, "the new certificate served", func() error {
		if got := tn.serial(t); got != want {
			return fmt.Errorf("serial %s (first %s), want %s", got, first, want)
		}
		return nil
	})

	// On SIGHUP: a certificate of the same size written with the files' old times.
	third := tn.ca.Issue(t)
	for len(third.CertPEM) != len(next.CertPEM) || len(third.KeyPEM) != len(next.KeyPEM) {
		third = tn.ca.Issue(t)
	}
	cert, key := tn.dir+"/cert.pem", tn.dir+"/key.pem"
	stCert, _ := os.Stat(cert)
	stKey, _ := os.Stat(key)
	tmpCert, tmpKey := third.Write(t, t.TempDir()) // on the same file system: renamed in below
	if err := os.Chtimes(tmpCert, stCert.ModTime(), stCert.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmpKey, stKey.ModTime(), stKey.ModTime()); err != nil {
		t.Fatal(err)
	}
	for _, mv := range [][2]string{{tmpKey, key}, {tmpCert, cert}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := tn.serial(t); got != want {
		t.Fatalf("served %s before SIGHUP; the watcher was not to notice", got)
	}
	if err := tn.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprint(third.Serial)
	poll.NoError(t, clusterWait, "the certificate loaded on SIGHUP", func() error {
		if got := tn.serial(t); got != want {
			return fmt.Errorf("serial %s, want %s", got, want)
		}
		return nil
	})

	// The connection from before both reloads is still there.
	tn.publish(t, "tls-room", "two")
	expectTick(t, old, "two")
	fresh := tn.wss(t, "tls-room")
	tn.publish(t, "tls-room", "three")
	expectTick(t, old, "three")
	expectTick(t, fresh, "three")
	if !strings.Contains(tn.logs.String(), `"wss://`) {
		t.Errorf("the start line does not say wss://")
	}
}

// TestTLSConfigErrors: TLS settings are checked once, at start, each error naming its field.
func TestTLSConfigErrors(t *testing.T) {
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t).Write(t, t.TempDir())
	_, otherKey := ca.Issue(t).Write(t, t.TempDir())
	notPEM := writeFile(t, "ca.pem", "not a certificate")
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"HERALD_TLS_CERT_FILE": cert}, []string{"tls.key_file: must be set with tls.cert_file"}},
		{map[string]string{"HERALD_TLS_KEY_FILE": key}, []string{"tls.cert_file: must be set with tls.key_file"}},
		{map[string]string{"HERALD_TLS_CERT_FILE": cert, "HERALD_TLS_KEY_FILE": otherKey}, []string{"tls.cert_file: tls: private key does not match public key"}},
		{map[string]string{"HERALD_TLS_CERT_FILE": "/nonexistent.pem", "HERALD_TLS_KEY_FILE": key}, []string{"tls.cert_file: open /nonexistent.pem"}},
		{map[string]string{"HERALD_TLS_CERT_FILE": cert, "HERALD_TLS_KEY_FILE": key, "HERALD_TLS_ACME_DOMAINS": "a.example"},
			[]string{"tls.acme.domains: ACME and tls.cert_file exclude each other"}},
		{map[string]string{"HERALD_TLS_ACME_DOMAINS": "localhost,a.example", "HERALD_TLS_ACME_DIRECTORY": "http://ca.example/dir", "HERALD_TLS_ACME_CA_FILE": notPEM},
			[]string{`tls.acme.domains: "localhost" is not a host name a CA certifies`, "tls.acme.cache_dir: must be set with tls.acme.domains",
				"tls.acme.directory: want an https:// URL", "tls.acme.ca_file: " + fmt.Sprintf("%q", notPEM) + " holds no PEM certificate"}},
		{map[string]string{"HERALD_TLS_ACME_EMAIL": "ops@a.example"}, []string{"tls.acme.email: set without tls.acme.domains"}},
	} {
		_, err := load(t, nil, tc.env)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: missing %q in\n%v", tc.env, w, err)
			}
		}
	}
	if _, err := load(t, nil, map[string]string{"HERALD_TLS_CERT_FILE": cert, "HERALD_TLS_KEY_FILE": key}); err != nil {
		t.Fatal(err)
	}
}
