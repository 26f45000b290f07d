package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/herald-rt/herald/internal/servicetest"
)

// TestClusterSecured runs two nodes on each engine as docs/security.md says to run a bus in
// production: over TLS with a client certificate from the test's CA, authenticated (a Redis
// ACL user with the documented rules; a NATS nkey user), with a cluster secret and encryption,
// and checks that a publish on one node reaches a subscriber on the other.
func TestClusterSecured(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server, redis-server and herald nodes")
	}
	ca := servicetest.NewCA(t)
	cert, key := ca.Issue(t, "herald-node", true)
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	secretFile := write("secret", strings.Repeat("k", 64)+"\n")
	tlsFlags := []string{"--cluster-tls-ca-file", ca.CertFile, "--cluster-tls-cert-file", cert, "--cluster-tls-key-file", key,
		"--cluster-secret-file", secretFile, "--cluster-encrypt"}
	for _, engine := range []string{"redis", "nats"} {
		t.Run(engine, func(t *testing.T) {
			var url string
			flags := tlsFlags
			if engine == "redis" {
				acl := "herald on >pw resetchannels &herald.* resetkeys ~herald.* -@all +@connection +publish +subscribe +unsubscribe " +
					"+evalsha +eval +hget +hset +hincrby +del +xadd +xrange +pexpire +time"
				srv := servicetest.RedisTLS(t, ca, append([]string{"--user", "default", "off", "--user"}, strings.Fields(acl)...)...)
				url = "rediss://herald:pw@" + srv.Addr() + "/0"
			} else {
				user, err := nkeys.CreateUser()
				if err != nil {
					t.Fatal(err)
				}
				pub, _ := user.PublicKey()
				seed, _ := user.Seed()
				scert, skey := ca.Issue(t, "nats-server", false)
				srv := servicetest.NATSConf(t, fmt.Sprintf("tls {cert_file: %q, key_file: %q, ca_file: %q, verify: true}\n"+
					"authorization {users: [{nkey: %s, permissions: {publish: [\"herald.>\", \"$JS.API.>\"], subscribe: [\"herald.>\", \"_INBOX.>\"]}}]}",
					scert, skey, ca.CertFile, pub), true)
				url = "tls://" + srv.Addr()
				flags = append(flags, "--cluster-nats-nkey-file", write("herald.nk", string(seed)))
			}
			var nodes []*node
			for _, name := range []string{"node-a", "node-b"} {
				n := startNode(t, name, url, flags...)
				n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", engine, true) })
				nodes = append(nodes, n)
			}
			s := subscribe(t, nodes[1], "secured")
			deliver(t, nodes[0], s, "secured")
			if v, err := nodes[1].metric("bus_forged_total"); err != nil || v != 0 {
				t.Errorf("forged messages counted on a clean bus: %v, %v", v, err)
			}
		})
	}
}
