package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/internal/poll"
)

var commands = []string{"serve", "check-config", "bench", "version", "help"}

// TestHelpListsCommands: every spelling of help prints each command on a line of its own
// to stdout and exits 0; an unknown command prints the list to stderr and exits 2.
func TestHelpListsCommands(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		var out, errs bytes.Buffer
		if code := run([]string{arg}, func(string) string { return "" }, &out, &errs); code != 0 {
			t.Errorf("herald %s: exit %d, want 0; stderr %q", arg, code, errs.String())
		}
		checkUsage(t, "herald "+arg, out.String())
	}
	var out, errs bytes.Buffer
	if code := run([]string{"nonsense"}, func(string) string { return "" }, &out, &errs); code != 2 {
		t.Errorf("herald nonsense: exit %d, want 2", code)
	}
	if !strings.Contains(errs.String(), `unknown command "nonsense"`) {
		t.Errorf("herald nonsense: stderr %q does not name the command", errs.String())
	}
	checkUsage(t, "herald nonsense", errs.String())
}

// checkUsage fails unless out lists every command, one line each.
func checkUsage(t *testing.T, what, out string) {
	t.Helper()
	for _, c := range commands {
		n := 0
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 1 && f[0] == c {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d lines describe %q, want 1; output:\n%s", what, n, c, out)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		var out, errs bytes.Buffer
		if code := run([]string{arg}, func(string) string { return "" }, &out, &errs); code != 0 {
			t.Errorf("herald %s: exit %d, want 0; stderr %q", arg, code, errs.String())
		}
		if want := "herald " + buildVersion() + "\n"; out.String() != want {
			t.Errorf("herald %s printed %q, want %q", arg, out.String(), want)
		}
	}
}

// TestLoggerDurationsAsStrings: a JSON log writes a duration as "10s", not nanoseconds.
func TestLoggerDurationsAsStrings(t *testing.T) {
	var buf bytes.Buffer
	newLogger(config.LogConfig{Level: "info", Format: "json"}, &buf).Info("x", "deadline", 10*time.Second,
		slog.Group("g", "wait", 1500*time.Millisecond))
	var rec struct {
		Deadline any `json:"deadline"`
		G        struct {
			Wait any `json:"wait"`
		} `json:"g"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if rec.Deadline != "10s" || rec.G.Wait != "1.5s" {
		t.Fatalf("durations logged as %#v and %#v, want \"10s\" and \"1.5s\": %s", rec.Deadline, rec.G.Wait, buf.String())
	}
}

// TestBuiltBinary builds herald with a version set by -ldflags, as a release does, and runs
// it: the commands, --version, and a node whose start line, detailed /health (on the metrics
// listener) and /metrics carry that version, whose start line lists the apps without their secrets, and whose JSON log writes
// durations as strings.
func TestBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herald")
	}
	const v = "v9.9.9-test"
	bin := filepath.Join(t.TempDir(), "herald")
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+v, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cli := func(args ...string) (string, int) {
		t.Helper()
		out, err := exec.Command(bin, args...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("herald %v: %v", args, err)
		}
		return string(out), 0
	}
	for _, arg := range []string{"-h", "help"} {
		out, code := cli(arg)
		if code != 0 {
			t.Errorf("herald %s: exit %d, want 0", arg, code)
		}
		checkUsage(t, "herald "+arg, out)
	}
	for _, arg := range []string{"--version", "version"} {
		if out, code := cli(arg); code != 0 || out != "herald "+v+"\n" {
			t.Errorf("herald %s: exit %d, output %q; want 0 and %q", arg, code, out, "herald "+v+"\n")
		}
	}

	port, mport := freePort(t), freePort(t)
	cmd := exec.Command(bin, "serve", "--port", strconv.Itoa(port), "--metrics-port", strconv.Itoa(mport),
		"--log-format", "json", "--app-id", "app-7", "--app-key", "key-7", "--app-secret", "very-secret-7",
		"--shutdown-drain-delay", "0") // the drain has its own test (TestDrainDelay)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("herald's log:\n%s", logs.String())
		}
	}()
	get := func(url string) (string, error) {
		select {
		case err := <-exited:
			stopped = true
			return "", fmt.Errorf("herald exited: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	var health struct{ Status, Version string }
	poll.NoError(t, 60*time.Second, "the metrics listener's /health to answer with the version", func() error {
		body, err := get("http://127.0.0.1:" + strconv.Itoa(mport) + "/health")
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(body), &health); err != nil || health.Version != v {
			return fmt.Errorf("body %q (%v), want version %q", body, err, v)
		}
		return nil
	})
	want := fmt.Sprintf(`herald_build_info{goversion=%q,version=%q} 1`, runtime.Version(), v)
	poll.NoError(t, 60*time.Second, "/metrics to export herald_build_info", func() error {
		body, err := get("http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(body, want+"\n") {
			return fmt.Errorf("no line %q among %d bytes of metrics", want, len(body))
		}
		return nil
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("herald exited with %v after SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("herald still running 60s after SIGTERM")
	}
	out := logs.String()
	if strings.Contains(out, "very-secret-7") {
		t.Errorf("the log shows the app's secret")
	}
	var sawStart, sawDeadline bool
	for line := range strings.Lines(out) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		switch rec["msg"] {
		case "herald listening":
			sawStart = true
			apps, _ := json.Marshal(rec["apps"])
			if rec["version"] != v || string(apps) != `[{"id":"app-7","key":"key-7"}]` {
				t.Errorf("start line has version %v and apps %s; want %q and [{\"id\":\"app-7\",\"key\":\"key-7\"}]", rec["version"], apps, v)
			}
		case "shutting down: closing connections with 4200":
			sawDeadline = true
			if _, ok := rec["deadline"].(string); !ok {
				t.Errorf("shutdown deadline logged as %#v, want a duration string", rec["deadline"])
			}
		}
	}
	if !sawStart || !sawDeadline {
		t.Errorf("saw the start line: %v, the shutdown line: %v", sawStart, sawDeadline)
	}
}
