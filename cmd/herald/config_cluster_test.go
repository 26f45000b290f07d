package main

import (
	"log/slog"
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

// TestClusterNeedsSecret: a cluster without cluster.secret refuses to start, its error naming
// the field and how to make one; cluster.insecure lets it start; insecure makes no sense with a
// secret or without a bus.
func TestClusterNeedsSecret(t *testing.T) {
	_, err := load(t, []string{"--cluster-url", "redis://127.0.0.1:6379/0"}, nil)
	if err == nil {
		t.Fatal("a cluster without cluster.secret was accepted")
	}
	for _, want := range []string{"cluster.secret: not set", "openssl rand -hex 32", "cluster.secret_file", "cluster.insecure: true", "(from flag --cluster-url)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Count(err.Error(), "\n  ") != 1 {
		t.Errorf("want one problem: %v", err)
	}
	var stderr syncBuffer
	noEnv := func(string) string { return "" }
	if code := serve([]string{"--cluster-url", "nats://127.0.0.1:4222"}, noEnv, &stderr, false); code != 2 ||
		!strings.Contains(stderr.String(), "cluster.secret: not set") || !strings.Contains(stderr.String(), "openssl rand -hex 32") {
		t.Errorf("herald serve on a bus without a secret: exit %d, %q; want 2 and the error", code, stderr.String())
	}
	c, err := load(t, []string{"--cluster-url", "redis://127.0.0.1:6379/0", "--cluster-insecure"}, nil)
	if err != nil || !c.Cluster.Insecure {
		t.Fatalf("cluster.insecure: %v, %+v", err, c.Cluster)
	}
	c, err = load(t, nil, map[string]string{"HERALD_CLUSTER_URL": "nats://127.0.0.1:4222", "HERALD_CLUSTER_INSECURE": "true"})
	if err != nil || !c.Cluster.Insecure {
		t.Fatalf("HERALD_CLUSTER_INSECURE: %v, %+v", err, c.Cluster)
	}
	file := writeFile(t, "insecure.yaml", "cluster:\n  url: nats://127.0.0.1:4222\n  insecure: true\n")
	if c, err = load(t, []string{"--config", file}, nil); err != nil || !c.Cluster.Insecure {
		t.Fatalf("cluster.insecure in a file: %v, %+v", err, c.Cluster)
	}
	if _, err := load(t, []string{"--cluster-url", "nats://127.0.0.1:4222", "--cluster-secret-file", "/nonexistent/secret"}, nil); err == nil ||
		strings.Contains(err.Error(), "cluster.secret: not set") {
		t.Errorf("a missing secret file: %v; want its own error only", err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"with a secret", []string{"--cluster-url", "nats://127.0.0.1:4222", "--cluster-insecure", "--cluster-secret", strings.Repeat("s", 32)},
			"cluster.insecure: set with cluster.secret"},
		{"single node", []string{"--cluster-insecure"}, "cluster.insecure: set without cluster.url"},
	} {
		if _, err := load(t, tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestWarnUnsafeBus: a node warns at start when it runs unsealed (cluster.insecure), wherever
// its bus; and when its bus is reached without TLS on a host off this machine, whatever the
// secret. cluster_unsealed and cluster_bus_plaintext say the same.
func TestWarnUnsafeBus(t *testing.T) {
	secret := strings.Repeat("s", 32)
	for _, tc := range []struct {
		url, secret, caFile string
		unsealed, plain     bool
	}{
		{"nats://127.0.0.1:4222", "", "", true, false},
		{"nats://127.0.0.1:4222", secret, "", false, false},
		{"nats://localhost:4222,nats://[::1]:4223", secret, "", false, false},
		{"redis://127.0.0.2:6379/0", "", "", true, false},
		{"nats://10.0.0.5:4222", "", "", true, true},
		{"nats://10.0.0.5:4222", secret, "", false, true},
		{"nats://10.0.0.5:4222", secret, "ca.pem", false, false}, // TLS files turn TLS on for NATS
		{"nats://127.0.0.1:4222,tls://bus.example:4222", secret, "", false, false},
		{"redis://:pw@redis.example:6379/0", secret, "", false, true},
		{"rediss://:pw@redis.example:6380", "", "", true, false},
		{"rediss://:pw@redis.example:6380", secret, "", false, false},
	} {
		u, err := parseBusURL(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		c := ClusterConfig{URL: tc.url, Secret: tc.secret, Insecure: tc.secret == "", TLSCAFile: tc.caFile}
		warnUnsafe(c, u, slog.New(slog.NewTextHandler(&logs, nil)))
		if got := strings.Contains(logs.String(), "CLUSTER BUS UNSEALED"); got != tc.unsealed {
			t.Errorf("%s (secret %v): warned unsealed %v, want %v: %s", tc.url, tc.secret != "", got, tc.unsealed, logs.String())
		}
		if got := strings.Contains(logs.String(), "without TLS"); got != tc.plain {
			t.Errorf("%s: warned without TLS %v, want %v: %s", tc.url, got, tc.plain, logs.String())
		}
		if plaintext(c, u) != tc.plain {
			t.Errorf("%s: plaintext %v, want %v", tc.url, !tc.plain, tc.plain)
		}
		if strings.Contains(logs.String(), ":pw@") {
			t.Errorf("the warning shows the password: %s", logs.String())
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
