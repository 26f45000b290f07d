package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/session"
)

// benchServer serves a herald session server and REST API on a free port of 127.0.0.1, with wrap (when
// not nil) in front of the API, and returns the flags that point herald-bench at it.
func benchServer(t *testing.T, wrap func(http.Handler) http.Handler) []string {
	t.Helper()
	return benchServerOf(t, herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret", Limits: herald.DefaultLimits}, wrap)
}

// benchServerOf is benchServer serving app.
func benchServerOf(t *testing.T, app herald.App, wrap func(http.Handler) http.Handler) []string {
	t.Helper()
	apps := herald.NewStaticApps([]herald.App{app})
	h, err := session.New(session.Config{}, apps, cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var api http.Handler = httpapi.New(httpapi.Config{}, apps, h, func() httpapi.HealthReport { return httpapi.HealthReport{Status: "ok"} }, nil, nil)
	if wrap != nil {
		api = wrap(api)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		_ = h.Shutdown(context.Background())
	})
	addr := ln.Addr().String()
	return []string{"--ws", "ws://" + addr, "--rest", "http://" + addr, "--timeout", "30s", "--quiet"}
}

// TestBenchPublishShortestRun: herald-bench publish --duration 1ns still makes one request
// per publisher, measures their deliveries and exits 0.
func TestBenchPublishShortestRun(t *testing.T) {
	args := append([]string{"publish"}, benchServer(t, nil)...)
	args = append(args, "--duration", "1ns", "--publishers", "2", "--channels", "2", "--wait", "30s")
	var stdout, stderr bytes.Buffer
	if code := benchCmd(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !regexp.MustCompile(`published +2 requests, 0 failed; 2 events accepted`).MatchString(stdout.String()) ||
		!strings.Contains(stdout.String(), "2 of 2 (100.00%)") {
		t.Fatalf("report lacks 2 requests, 2 events and 2 deliveries:\n%s", stdout.String())
	}
}

// TestBenchPublishNothingDelivered: a server that accepts every event and delivers none makes
// herald-bench publish fail, saying it measured nothing.
func TestBenchPublishNothingDelivered(t *testing.T) {
	swallow := func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				io.WriteString(w, "{}")
				return
			}
			api.ServeHTTP(w, r)
		})
	}
	args := append([]string{"publish"}, benchServer(t, swallow)...)
	// Nothing will ever arrive: a short wait proves it as well as a long one.
	args = append(args, "--duration", "1ns", "--publishers", "2", "--channels", "2", "--wait", "100ms")
	var stdout, stderr bytes.Buffer
	code := benchCmd(args, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "herald-bench publish: the run measured nothing: none of the 2 expected deliveries arrived") {
		t.Fatalf("exit %d, stderr %q; want 1 and that nothing was measured", code, stderr.String())
	}
}

// TestBenchListFlagErrors: a malformed --ws, --server-pid or --metrics list is a usage error
// naming the flag, before any connection.
func TestBenchListFlagErrors(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ws", "ws://127.0.0.1:1,,ws://127.0.0.1:2"}, `--ws "ws://127.0.0.1:1,,ws://127.0.0.1:2": element 2 of 3 is empty`},
		{[]string{"--ws", "ws://127.0.0.1:1,http://127.0.0.1:2"}, `--ws node 2 "http://127.0.0.1:2": only ws:// and wss:// URLs are supported`},
		{[]string{"--server-pid", pid + ",,"}, `--server-pid "` + pid + `,,": element 2 of 3 is empty`},
		{[]string{"--server-pid", "12x"}, `--server-pid "12x": not a process id`},
		{[]string{"--ws", "ws://127.0.0.1:1,ws://127.0.0.1:2", "--server-pid", pid + "," + pid + "," + pid}, "--server-pid: 3 pids for 2 --ws nodes"},
		{[]string{"--metrics", "http://127.0.0.1:1/metrics,"}, `--metrics "http://127.0.0.1:1/metrics,": element 2 of 2 is empty`},
		{[]string{"--bus-pid", "x1"}, `--bus-pid "x1": not a process id`},
		{[]string{"--bus-pid", pid}, "--bus-pid: needs --server-pid"},
	} {
		var stdout, stderr bytes.Buffer
		code := benchCmd(append([]string{"idle", "--quiet"}, c.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "herald-bench idle: "+c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestBenchIdleTwoNodes: herald-bench idle with two --ws nodes and a pid for each spreads the
// connections evenly and names the nodes in its report.
func TestBenchIdleTwoNodes(t *testing.T) {
	a, b := benchServer(t, nil), benchServer(t, nil)
	pid := strconv.Itoa(os.Getpid())
	args := append([]string{"idle"}, a...)
	args = append(args, "--ws", a[1]+","+b[1], "--server-pid", pid+","+pid, "--conns", "6", "--channels", "2")
	var stdout, stderr bytes.Buffer
	if code := benchCmd(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"idle: 6 connections over 2 channels on 2 nodes " + a[1] + ", " + b[1] + " (server pids " + pid + ", " + pid + ")",
		"per node, in --ws order: 3, 3", "    node       " + b[1] + " (pid " + pid + ")"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestBenchPresence: herald-bench presence joins, checks every member saw every other and the
// REST counts, and exits 0; a channel over the server's 100 members exits 1.
func TestBenchPresence(t *testing.T) {
	server := benchServer(t, nil)
	args := append([]string{"presence"}, server...)
	args = append(args, "--clients", "12", "--per-channel", "5")
	var stdout, stderr bytes.Buffer
	if code := benchCmd(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	// 5×4 + 5×4 + 2×1 pairs.
	for _, want := range []string{"presence: 12 members in 3 channels of 5", "12 joined in", "42 of 42 seen (100.00%): missing 0, duplicated 0",
		"every channel listed with its user count", "no channel listed"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}

	args = append([]string{"presence"}, server...)
	args = append(args, "--clients", "101", "--per-channel", "101", "--rest-check=false")
	stdout.Reset()
	stderr.Reset()
	code := benchCmd(args, &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), "100 established, 1 failed") || !strings.Contains(stderr.String(), "the run was not clean") {
		t.Fatalf("exit %d; want 1 with one join refused\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

// TestBenchChannels: herald-bench channels times GET /channels once every channel is listed.
func TestBenchChannels(t *testing.T) {
	args := append([]string{"channels"}, benchServer(t, nil)...)
	args = append(args, "--channels", "20", "--requests", "3")
	var stdout, stderr bytes.Buffer
	if code := benchCmd(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "all 20 channels listed after") || !strings.Contains(stdout.String(), "answers      3, 0 not listing exactly 20 channels") {
		t.Fatalf("report lacks the listing and 3 answers:\n%s", stdout.String())
	}
}

// TestBenchRecover: herald-bench recover against a server keeping history exits 0 with every
// client recovered; against one whose history is too short for the outage, 1.
func TestBenchRecover(t *testing.T) {
	for _, c := range []struct {
		size int
		code int
		want string
	}{{1000, 0, "recovered    10 of 10, 0 failed"}, {3, 1, "10× recovered:false, too_old"}} {
		app := herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret", Limits: herald.DefaultLimits,
			History: []herald.HistoryRule{{Channels: "recover", Size: c.size, TTL: time.Hour}}}
		args := append([]string{"recover"}, benchServerOf(t, app, nil)...)
		args = append(args, "--clients", "10", "--outage", "50ms", "--events", "5", "--before", "1", "--after", "1")
		var stdout, stderr bytes.Buffer
		if code := benchCmd(args, &stdout, &stderr); code != c.code || !strings.Contains(stdout.String(), c.want) {
			t.Fatalf("history of %d: exit %d; want %d and %q\nstdout:\n%s\nstderr:\n%s", c.size, code, c.code, c.want, stdout.String(), stderr.String())
		}
	}
}

// TestBuiltProcs builds herald-bench and runs idle with --procs 2: the children are the same
// binary's hidden child command.
func TestBuiltProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herald-bench")
	}
	bin := t.TempDir() + "/herald-bench"
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := append([]string{"idle", "--procs", "2", "--conns", "20", "--channels", "2"}, benchServer(t, nil)...)
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("herald-bench %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "idle: 20 connections over 2 channels") {
		t.Errorf("the report does not show the 20 connections over 2 channels:\n%s", stdout.String())
	}
}

// TestBenchMultichannelPublishFlags: the multichannel publish patterns' flags that exclude each
// other fail the run before any connection (nothing listens on the target), naming the flags.
func TestBenchMultichannelPublishFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--publish-per-channel", "--batch"}, "--publish-per-channel and --batch exclude each other"},
		{[]string{"--publish-per-channel", "--publishers", "4"}, "more than 1 only with --batch (--publish-per-channel runs one publisher per channel)"},
		{[]string{"--publish-per-channel", "--channels", "300"}, "--publish-per-channel: --channels must be at most 256"},
		{[]string{"--batch", "--spread-publishes"}, "--spread-publishes needs --publish-per-channel"},
	} {
		args := append([]string{"multichannel", "--quiet", "--ws", "ws://127.0.0.1:1", "--rest", "http://127.0.0.1:1"}, c.args...)
		var stdout, stderr bytes.Buffer
		if code := benchCmd(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "herald-bench multichannel: ") ||
			!strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want a failure saying %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestBenchMultichannelPerChannel: herald-bench multichannel --publish-per-channel --json
// reports the pattern, its publishers and each request's latency, every event delivered.
func TestBenchMultichannelPerChannel(t *testing.T) {
	args := append([]string{"multichannel"}, benchServer(t, nil)...)
	args = append(args, "--publish-per-channel", "--subs", "6", "--channels", "3", "--burst", "2", "--rounds", "2",
		"--interval", "50ms", "--wait", "30s", "--json")
	var stdout, stderr bytes.Buffer
	if code := benchCmd(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	var rep struct {
		Publish        string `json:"publish"`
		Publishers     int    `json:"publishers"`
		PublishLatency struct {
			Count int64 `json:"count"`
		} `json:"publish_latency"`
		Delivery struct {
			Delivered int64 `json:"delivered"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if rep.Publish != "per-channel" || rep.Publishers != 3 || rep.PublishLatency.Count != 12 || rep.Delivery.Delivered != 24 {
		t.Fatalf("report %+v; want per-channel, 3 publishers, 12 requests, 24 deliveries", rep)
	}
}
