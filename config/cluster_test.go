package config

import (
	"strings"
	"testing"
	"time"
)

// TestClusterSecretConfig: cluster.secret from a file, and every mistake in the secrets, the
// TLS files and the NATS credentials named by its field, never showing a secret.
func TestClusterSecretConfig(t *testing.T) {
	secret := "s3cret-" + strings.Repeat("x", 32)
	file := writeFile(t, "secret", secret+"\n")
	c, err := load(t, []string{"--cluster-url", "nats://127.0.0.1:4222", "--cluster-secret-file", file}, nil)
	if err != nil || c.Cluster.Secret != secret {
		t.Fatalf("secret from a file: %q, %v", c.Cluster.Secret, err)
	}
	c, err = load(t, nil, map[string]string{"HERALD_CLUSTER_URL": "redis://127.0.0.1:6379", "HERALD_CLUSTER_ACCEPT_SECRET_FILE": file,
		"HERALD_CLUSTER_SECRET": strings.Repeat("n", 32), "HERALD_CLUSTER_ENCRYPT": "true"})
	if err != nil || c.Cluster.AcceptSecret != secret || !c.Cluster.Encrypt {
		t.Fatalf("accepted secret from a file: %+v, %v", c.Cluster, err)
	}
	pem := writeFile(t, "ca.pem", "not a certificate")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"short", []string{"--cluster-secret", "s3cret-short"}, "cluster.secret: 12 bytes, want at least 32"},
		{"both", []string{"--cluster-secret", secret, "--cluster-secret-file", file}, "cluster.secret_file: set cluster.secret or cluster.secret_file, not both"},
		{"missing file", []string{"--cluster-secret-file", "/nonexistent/secret"}, "cluster.secret_file: open /nonexistent/secret: no such file or directory"},
		{"empty file", []string{"--cluster-secret-file", writeFile(t, "empty", "\n")}, "is empty"},
		{"accept alone", []string{"--cluster-accept-secret", secret}, "cluster.accept_secret: needs cluster.secret"},
		{"accept same", []string{"--cluster-secret", secret, "--cluster-accept-secret", secret}, "cluster.accept_secret: is cluster.secret"},
		{"encrypt alone", []string{"--cluster-encrypt"}, "cluster.encrypt: needs cluster.secret"},
		{"skew", []string{"--cluster-secret", secret, "--cluster-clock-skew", "10ms"}, "cluster.clock_skew"},
		{"cert alone", []string{"--cluster-tls-cert-file", file}, "cluster.tls_cert_file: give cluster.tls_cert_file and cluster.tls_key_file together"},
		{"bad CA", []string{"--cluster-url", "rediss://127.0.0.1:6379", "--cluster-tls-ca-file", pem}, "cluster.tls_ca_file: tls CA: " + pem + " holds no PEM certificate"},
		{"missing CA", []string{"--cluster-tls-ca-file", "/nonexistent/ca.pem"}, "cluster.tls_ca_file: stat /nonexistent/ca.pem"},
		{"plain redis", []string{"--cluster-url", "redis://127.0.0.1:6379", "--cluster-tls-ca-file", file}, "cluster.url: TLS files are set (cluster.tls_*): use rediss://"},
		{"creds and nkey", []string{"--cluster-nats-creds-file", file, "--cluster-nats-nkey-file", file}, "cluster.nats_creds_file: give cluster.nats_creds_file or cluster.nats_nkey_file, not both"},
		{"creds on redis", []string{"--cluster-url", "redis://127.0.0.1:6379", "--cluster-nats-creds-file", file}, "cluster.nats_creds_file: cluster.url is a Redis bus"},
	} {
		_, err := load(t, tc.args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the secret: %v", tc.name, err)
		}
	}
}

// TestClusterNATSKeepaliveConfig: the NATS keepalive from flags and the environment, its
// defaults, and each mistake named by its field.
func TestClusterNATSKeepaliveConfig(t *testing.T) {
	c, err := load(t, []string{"--cluster-url", "nats://127.0.0.1:4222", "--cluster-insecure"}, nil)
	if err != nil || c.Cluster.NATSPingInterval.Duration != 3*time.Second || c.Cluster.NATSPingsOutstanding != 3 {
		t.Fatalf("defaults: %v × %d, %v", c.Cluster.NATSPingInterval, c.Cluster.NATSPingsOutstanding, err)
	}
	c, err = load(t, []string{"--cluster-url", "nats://127.0.0.1:4222", "--cluster-insecure", "--cluster-nats-ping-interval", "20s"},
		map[string]string{"HERALD_CLUSTER_NATS_PINGS_OUTSTANDING": "4"})
	if err != nil || c.Cluster.NATSPingInterval.Duration != 20*time.Second || c.Cluster.NATSPingsOutstanding != 4 {
		t.Fatalf("set: %v × %d, %v", c.Cluster.NATSPingInterval, c.Cluster.NATSPingsOutstanding, err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"short", []string{"--cluster-nats-ping-interval", "10ms"}, "cluster.nats_ping_interval: 10ms must be at least 1s"},
		{"zero pings", []string{"--cluster-nats-pings-outstanding", "0"}, "cluster.nats_pings_outstanding: 0 must be at least 1"},
		{"on redis", []string{"--cluster-url", "redis://127.0.0.1:6379", "--cluster-nats-pings-outstanding", "5"},
			"cluster.nats_ping_interval: cluster.url is a Redis bus: the NATS keepalive does not apply"},
	} {
		if _, err := load(t, tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}
