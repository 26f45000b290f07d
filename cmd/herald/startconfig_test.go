package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/internal/busurl"
	"github.com/herald-rt/herald/internal/runtimechecks"
)

// load runs config.Load with the runtime's checks, env as the whole environment.
func load(t testing.TB, args []string, env map[string]string) (config.Config, error) {
	t.Helper()
	return config.Load(args, func(k string) string { return env[k] }, runtimechecks.Checks())
}

// TestAppStoreWarnsUnencrypted: a node whose app store is on another host and may be reached
// without TLS (PostgreSQL without sslmode, so pgx's prefer; MySQL without tls) warns at start,
// naming the host and the setting that fixes it, never the password; one on this machine, or
// with sslmode=verify-full, does not. The start itself fails here (no database answers): the
// warning comes before the connection.
func TestAppStoreWarnsUnencrypted(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		flag, url string
		warn      string // "": none
	}{
		{"--app-store-postgres-url", "postgres://herald:pw-0123@192.0.2.1:5432/apps?connect_timeout=1", "sslmode=verify-full"},
		{"--app-store-postgres-url", "postgres://herald:pw-0123@192.0.2.1:5432/apps?connect_timeout=1&sslmode=verify-full", ""},
		{"--app-store-postgres-url", "postgres://herald:pw-0123@127.0.0.1:1/apps?connect_timeout=1", ""},
		{"--app-store-mysql-dsn", "herald:pw-0123@tcp(192.0.2.1:3306)/apps?timeout=1s", "tls=true"},
		{"--app-store-mysql-dsn", "herald:pw-0123@tcp(192.0.2.1:3306)/apps?timeout=1s&tls=true", ""},
	} {
		var logs syncBuffer
		code := serve([]string{tc.flag, tc.url, "--port", strconv.Itoa(freePort(t)), "--metrics-enabled=false", "--app-store-refresh", "1s"},
			noEnv, &logs, false)
		if code != 1 {
			t.Errorf("%s: exit %d with no database; want 1:\n%s", tc.url, code, logs.String())
		}
		warned := strings.Contains(logs.String(), "may be reached without TLS")
		if warned != (tc.warn != "") || tc.warn != "" && (!strings.Contains(logs.String(), tc.warn) || !strings.Contains(logs.String(), "192.0.2.1")) {
			t.Errorf("%s: warned %v; want %q:\n%s", tc.url, warned, tc.warn, logs.String())
		}
		if strings.Contains(logs.String(), "pw-0123") {
			t.Errorf("%s: the log shows the password:\n%s", tc.url, logs.String())
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
		u, err := busurl.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		c := config.ClusterConfig{URL: tc.url, Secret: tc.secret, Insecure: tc.secret == "", TLSCAFile: tc.caFile}
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

// TestWebhookOptions: webhooks.* reach the sender's options; leave_delay 0 means none.
func TestWebhookOptions(t *testing.T) {
	c, err := load(t, []string{"--webhooks-leave-delay", "5s", "--webhooks-retry-for", "10m", "--webhooks-queue-size", "50"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := webhookOptions(c.Webhooks); o.LeaveDelay != 5*time.Second || o.RetryFor != 10*time.Minute || o.QueueSize != 50 {
		t.Fatalf("options %+v", o)
	}
	c, err = load(t, []string{"--webhooks-leave-delay", "0"}, nil)
	if err != nil || webhookOptions(c.Webhooks).LeaveDelay >= 0 {
		t.Fatalf("leave_delay 0 must mean no delay: %v %v", err, webhookOptions(c.Webhooks).LeaveDelay)
	}
}

// writeFile writes content to a file name in a temporary directory and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
