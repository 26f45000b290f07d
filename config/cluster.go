package config

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// clusterSecrets checks cluster.secret and cluster.accept_secret, each given itself or by a
// file (read here into the value), cluster.insecure, cluster.encrypt and cluster.clock_skew.
// A cluster needs a secret unless cluster.insecure says to run without one.
func (l *loader) clusterSecrets(c *ClusterConfig) {
	for _, s := range []struct {
		path string
		v    *string
		file string
	}{{"cluster.secret", &c.Secret, c.SecretFile}, {"cluster.accept_secret", &c.AcceptSecret, c.AcceptSecretFile}} {
		l.secretFile(s.path, s.v, s.file)
		if *s.v != "" && len(*s.v) < MinSecretBytes {
			l.problem(s.path, "%d bytes, want at least %d (say, 64 hex digits: openssl rand -hex 32)", len(*s.v), MinSecretBytes)
		}
	}
	l.longerThan("cluster.clock_skew", c.ClockSkew, time.Second)
	switch {
	case c.Insecure && c.URL == "":
		l.problem("cluster.insecure", "set without cluster.url: a single node has no bus")
	case c.Insecure && c.Secret != "":
		l.problem("cluster.insecure", "set with cluster.secret: the bus is sealed; drop one of them")
	case c.URL != "" && c.Secret == "" && !c.Insecure && c.SecretFile == "" && !l.failed["cluster.url"]:
		l.add("cluster.secret", l.source("cluster.url"), "not set, and cluster.url joins a cluster: without a secret whoever can publish on the bus "+
			"sends any event to any client, private and presence channels included. Make one with `openssl rand -hex 32`, "+
			"give every node the same (cluster.secret_file, HERALD_CLUSTER_SECRET_FILE or --cluster-secret-file), "+
			"or set cluster.insecure: true to run the cluster unsealed")
	}
	if c.Secret == "" {
		if c.AcceptSecret != "" {
			l.problem("cluster.accept_secret", "needs cluster.secret: a node without one accepts every message")
		}
		if c.Encrypt {
			l.problem("cluster.encrypt", "needs cluster.secret: the key is derived from it")
		}
		return
	}
	if c.AcceptSecret != "" && c.AcceptSecret == c.Secret {
		l.problem("cluster.accept_secret", "is cluster.secret: give the other secret of the rotation, or none")
	}
}

// secretFile checks a secret (the setting at path) given itself or in the file named by the
// setting path_file, and reads that file into *v. Errors never show the secret.
func (l *loader) secretFile(path string, v *string, file string) {
	if file != "" {
		if *v != "" {
			l.problem(path+"_file", "set %s or %s_file, not both", path, path)
			return
		}
		s, err := readSecret(file)
		if err != nil {
			l.problem(path+"_file", "%v", err)
			return
		}
		*v = s
	}
}

// maxSecretBytes bounds what a secret file may hold.
const maxSecretBytes = 64 << 10

// readSecret returns the content of a secret file, its final line break removed.
func readSecret(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("%s: over %d bytes: not a secret", path, maxSecretBytes)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// clusterTLS checks the bus's TLS and NATS credential files: each must be readable, and
// they must suit the engine cluster.url picks.
func (l *loader) clusterTLS(c *ClusterConfig) {
	files := []struct {
		key, path string
	}{
		{"cluster.tls_ca_file", c.TLSCAFile}, {"cluster.tls_cert_file", c.TLSCertFile}, {"cluster.tls_key_file", c.TLSKeyFile},
		{"cluster.nats_creds_file", c.NATSCredsFile}, {"cluster.nats_nkey_file", c.NATSNKeyFile},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			l.problem(f.key, "%v", err)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		l.problem("cluster.tls_cert_file", "give cluster.tls_cert_file and cluster.tls_key_file together")
	} else if c.TLSCertFile != "" {
		if err := l.check.TLSFiles(c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile); err != nil {
			l.problem("cluster.tls_cert_file", "%v", err)
		}
	} else if c.TLSCAFile != "" {
		if err := l.check.TLSFiles(c.TLSCAFile, "", ""); err != nil {
			l.problem("cluster.tls_ca_file", "%v", err)
		}
	}
	if c.NATSCredsFile != "" && c.NATSNKeyFile != "" {
		l.problem("cluster.nats_creds_file", "give cluster.nats_creds_file or cluster.nats_nkey_file, not both")
	}
	engine, tls, err := l.check.BusURL(c.URL)
	if c.URL == "" || err != nil {
		return
	}
	if engine == "redis" && (c.NATSCredsFile != "" || c.NATSNKeyFile != "") {
		l.problem("cluster.nats_creds_file", "cluster.url is a Redis bus: NATS credentials do not apply")
	}
	if engine == "redis" && !tls && (c.TLSCAFile != "" || c.TLSCertFile != "") {
		l.problem("cluster.url", "TLS files are set (cluster.tls_*): use rediss://, Redis over TLS")
	}
}

// clusterKeepalive checks the NATS connection's keepalive, cluster.nats_ping_interval and
// cluster.nats_pings_outstanding: a Redis bus has none of its own to set.
func (l *loader) clusterKeepalive(c *ClusterConfig) {
	l.longerThan("cluster.nats_ping_interval", c.NATSPingInterval, time.Second)
	l.atLeast("cluster.nats_pings_outstanding", c.NATSPingsOutstanding, 1)
	engine, _, err := l.check.BusURL(c.URL)
	if c.URL == "" || err != nil || engine != "redis" {
		return
	}
	if c.NATSPingInterval.Duration != NATSPingInterval || c.NATSPingsOutstanding != NATSPingsOutstanding {
		l.problem("cluster.nats_ping_interval", "cluster.url is a Redis bus: the NATS keepalive does not apply")
	}
}
