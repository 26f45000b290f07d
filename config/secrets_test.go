package config

import (
	"strings"
	"testing"
)

// TestSecretFiles: the app secret, the console token and the cluster URL can each be read
// from a file named by a _FILE variable or a -file flag (its final line break dropped), so
// that they are neither in the environment nor on the command line; a value and its file at
// the same level are an error, and a file that cannot be read is named with its field.
func TestSecretFiles(t *testing.T) {
	token := writeFile(t, "token", "0123456789abcdef-token\n")
	secret := writeFile(t, "secret", "s3cret-from-file\r\n")
	bus := writeFile(t, "bus", "redis://:pw@127.0.0.1:6379/0\n")
	c, err := load(t, []string{"--cluster-url-file", bus, "--cluster-insecure"}, map[string]string{
		"HERALD_CONSOLE_TOKEN_FILE": token,
		"HERALD_APP_ID":             "1", "HERALD_APP_KEY": "k", "HERALD_APP_SECRET_FILE": secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Console.Token != "0123456789abcdef-token" || c.Cluster.URL != "redis://:pw@127.0.0.1:6379/0" ||
		len(c.Apps) != 1 || c.Apps[0].Secret != "s3cret-from-file" {
		t.Fatalf("token %q, cluster url %q, apps %+v", c.Console.Token, c.Cluster.URL, c.Apps)
	}
	// Flags beat the environment, the file variants included.
	c, err = load(t, []string{"--app-secret-file", secret, "--console-token", "flag-token-0123456789"}, map[string]string{
		"HERALD_APP_ID": "1", "HERALD_APP_KEY": "k", "HERALD_APP_SECRET": "env-secret", "HERALD_CONSOLE_TOKEN_FILE": token,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Apps[0].Secret != "s3cret-from-file" || c.Console.Token != "flag-token-0123456789" {
		t.Fatalf("flags over env: secret %q, token %q", c.Apps[0].Secret, c.Console.Token)
	}

	_, err = load(t, []string{"--console-token", "x", "--console-token-file", token}, map[string]string{
		"HERALD_CLUSTER_URL": "nats://h:1", "HERALD_CLUSTER_URL_FILE": bus,
		"HERALD_APP_ID": "1", "HERALD_APP_KEY": "k", "HERALD_APP_SECRET": "a", "HERALD_APP_SECRET_FILE": "/nonexistent/secret",
	})
	for _, want := range []string{
		"console.token: set --console-token or its file, not both (from flag --console-token-file)",
		"cluster.url: set HERALD_CLUSTER_URL or its file, not both (from env HERALD_CLUSTER_URL_FILE)",
		"apps[0].secret: set env HERALD_APP_SECRET or its file, not both (from env HERALD_APP_SECRET_FILE)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
	_, err = load(t, nil, map[string]string{"HERALD_CONSOLE_TOKEN_FILE": "/nonexistent/token", "HERALD_CLUSTER_URL_FILE": writeFile(t, "empty", "\n")})
	for _, want := range []string{
		"console.token: open /nonexistent/token: no such file or directory (from env HERALD_CONSOLE_TOKEN_FILE)",
		"cluster.url: " + "", "is empty (from env HERALD_CLUSTER_URL_FILE)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
	// A bad value read from a file is reported as coming from that file, without the value.
	_, err = load(t, nil, map[string]string{"HERALD_CONSOLE_TOKEN_FILE": writeFile(t, "short", "short-secret\n")})
	if err == nil || !strings.Contains(err.Error(), "console.token: 12 characters, at least 16") ||
		!strings.Contains(err.Error(), "the file named by env HERALD_CONSOLE_TOKEN_FILE") || strings.Contains(err.Error(), "short-secret") {
		t.Errorf("short token from a file: %v", err)
	}
}
