package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// clusterWait bounds each wait of the cluster tests for something that normally takes
// milliseconds to a second (a node starting, a lost bus noticed, a reconnection). The test
// machines are shared and run -race, so it is generous; a passing test never waits it out.
const clusterWait = 60 * time.Second

// TestClusterNodes runs `herald serve` nodes on one real bus, for each engine: two nodes
// join it; a REST publish on one reaches a subscriber on the other; the bus server is
// killed, both nodes say so in /health and /ready and refuse a publish with 503; a third
// node starts meanwhile and serves; the bus comes back on the same port, every node is
// ready again, and delivery across nodes resumes.
func TestClusterNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server, redis-server and herald nodes")
	}
	for _, engine := range []string{"nats", "redis"} {
		t.Run(engine, func(t *testing.T) {
			var bus *servicetest.Server
			if engine == "nats" {
				bus = servicetest.NATS(t)
			} else {
				bus = servicetest.Redis(t)
			}
			a := startNode(t, "node-a", bus.URL())
			b := startNode(t, "node-b", bus.URL())
			for _, n := range []*node{a, b} {
				n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", engine, true) })
			}
			a.checkStartLine(t, engine, bus.URL())

			sub := subscribe(t, b, "news")
			deliver(t, a, sub, "news")

			bus.Stop(t)
			for _, n := range []*node{a, b} {
				n.waitHealth(t, "bus_down", func(h nodeHealth) error { return h.want("bus_down", engine, false) })
				n.waitReady(t, http.StatusServiceUnavailable, `{"ready":false,"status":"bus_down"}`)
			}
			status, header, body := a.publish(t, "news", "while the bus is down")
			if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" {
				t.Errorf("publish while the bus is down: status %d, Retry-After %q, body %s; want 503 with Retry-After",
					status, header.Get("Retry-After"), body)
			}
			c := startNode(t, "node-c", bus.URL())
			c.waitHealth(t, "a node started without its bus to serve", func(h nodeHealth) error { return h.want("bus_down", engine, false) })
			if !strings.Contains(c.logs.String(), "cluster bus unreachable at start") {
				t.Errorf("node-c did not log that its bus was unreachable at start:\n%s", c.logs.String())
			}

			bus.Start(t)
			for _, n := range []*node{a, b, c} {
				n.waitReady(t, http.StatusOK, `{"ready":true}`)
				n.waitHealth(t, "connected again", func(h nodeHealth) error { return h.want("ok", engine, true) })
			}
			deliver(t, a, sub, "news")

			for _, n := range []*node{a, b, c} {
				if err := n.stop(); err != nil {
					t.Errorf("%s: %v", n.name, err)
				}
				if strings.Contains(n.logs.String(), "\"level\":\"ERROR\"") {
					t.Errorf("%s logged an error:\n%s", n.name, n.logs.String())
				}
			}
		})
	}
}

// node is one `herald serve` process: the test binary run again as TestHelperServe.
type node struct {
	name, api string // api is host:port
	metrics   string // the metrics listener's host:port
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process has exited; then err holds its status
	err       error
	logs      syncBuffer
	client    *http.Client
}

// testClusterSecret is the cluster secret of the tests' nodes, unless a test gives its own
// (or runs unsealed with --cluster-insecure).
const testClusterSecret = "cluster-test-secret-0123456789abcdef"

// startNode starts a node on bus (none: "") with node id name and the extra flags, and
// registers its stop on cleanup. A node on a bus gets testClusterSecret unless extra sets
// --cluster-secret, --cluster-secret-file or --cluster-insecure.
func startNode(t *testing.T, name, bus string, extra ...string) *node {
	t.Helper()
	if bus == "" {
		return startServe(t, name, extra...)
	}
	flags := []string{"--cluster-url", bus, "--cluster-node-id", name}
	if !slices.ContainsFunc(extra, func(f string) bool {
		return f == "--cluster-secret" || f == "--cluster-secret-file" || f == "--cluster-insecure"
	}) {
		flags = append(flags, "--cluster-secret", testClusterSecret)
	}
	return startServe(t, name, append(flags, extra...)...)
}

// startServe starts `herald serve` with the flags given (ports, logs and shutdown chosen
// here), named name in the test's output, and registers its stop on cleanup.
func startServe(t *testing.T, name string, flags ...string) *node {
	t.Helper()
	port, mport := freePort(t), freePort(t)
	for mport == port { // a port freed a moment ago may come back at once
		mport = freePort(t)
	}
	n := &node{name: name, api: fmt.Sprintf("127.0.0.1:%d", port), metrics: fmt.Sprintf("127.0.0.1:%d", mport), done: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}}
	n.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperServe$")
	n.cmd.Env = append(os.Environ(), "HERALD_HELPER_SERVE="+fmt.Sprintf(
		"--port %d --metrics-port %d --log-format json --shutdown-timeout 20s %s", port, mport, strings.Join(flags, " ")))
	n.cmd.Stdout, n.cmd.Stderr = &n.logs, &n.logs
	orphanProof(n.cmd)
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.err = n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		select {
		case <-n.done:
		default:
			_ = n.cmd.Process.Kill() // exactly this node's pid
			<-n.done
		}
		// The node is this test binary: built with -race, it reports its own data races.
		if strings.Contains(n.logs.String(), "WARNING: DATA RACE") {
			t.Errorf("%s found a data race", n.name)
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", n.name, n.logs.String())
		}
	})
	return n
}

// stop sends SIGTERM and waits for the node to exit; it fails unless the exit is clean.
func (n *node) stop() error {
	select {
	case <-n.done:
		return fmt.Errorf("exited before SIGTERM: %v", n.err)
	default:
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-n.done:
		return n.err
	case <-time.After(clusterWait):
		return fmt.Errorf("still running %v after SIGTERM", clusterWait)
	}
}

// get answers path's status and body; it fails the test at once if the node has exited.
func (n *node) get(t *testing.T, path string) (int, []byte, error) {
	t.Helper()
	select {
	case <-n.done:
		t.Fatalf("%s exited: %v", n.name, n.err)
	default:
	}
	return n.getFrom(n.api, path)
}

// detail answers the metrics listener's /health: the whole report (the bus, the app store,
// the ingest sources, the version), of which the public /health gives the status and the
// connections only. It fails the test at once if the node has exited.
func (n *node) detail(t *testing.T) (int, []byte, error) {
	t.Helper()
	select {
	case <-n.done:
		t.Fatalf("%s exited: %v", n.name, n.err)
	default:
	}
	return n.getFrom(n.metrics, "/health")
}

func (n *node) getFrom(addr, path string) (int, []byte, error) {
	resp, err := n.client.Get("http://" + addr + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// nodeHealth is the part of the detailed /health the cluster tests read.
type nodeHealth struct {
	Status  string
	Cluster *struct {
		Engine    string
		NodeID    string `json:"node_id"`
		Connected bool
		Interests int
	}
}

func (h nodeHealth) want(status, engine string, connected bool) error {
	if h.Status != status || h.Cluster == nil || h.Cluster.Engine != engine || h.Cluster.Connected != connected {
		return fmt.Errorf("status %q, cluster %+v; want status %q, engine %q, connected %v", h.Status, h.Cluster, status, engine, connected)
	}
	return nil
}

// waitHealth polls the detailed /health until check accepts it.
func (n *node) waitHealth(t *testing.T, what string, check func(nodeHealth) error) {
	t.Helper()
	poll.NoError(t, clusterWait, n.name+": "+what, func() error {
		status, body, err := n.detail(t)
		if err != nil {
			return err
		}
		var h nodeHealth
		if err := json.Unmarshal(body, &h); err != nil || status != http.StatusOK {
			return fmt.Errorf("status %d, body %s (%v)", status, body, err)
		}
		if h.Cluster != nil && h.Cluster.NodeID != n.name {
			t.Fatalf("%s: /health names node %q", n.name, h.Cluster.NodeID)
		}
		return check(h)
	})
}

// waitReady polls /ready until it answers status with exactly body.
func (n *node) waitReady(t *testing.T, status int, body string) {
	t.Helper()
	poll.NoError(t, clusterWait, fmt.Sprintf("%s: /ready %d %s", n.name, status, body), func() error {
		s, b, err := n.get(t, "/ready")
		if err != nil {
			return err
		}
		if s != status || strings.TrimSpace(string(b)) != body {
			return fmt.Errorf("%d %s", s, b)
		}
		return nil
	})
}

// checkStartLine checks that the start line names the engine, the node id and the URL.
func (n *node) checkStartLine(t *testing.T, engine, url string) {
	t.Helper()
	for line := range strings.Lines(n.logs.String()) {
		var rec struct {
			Msg     string
			Cluster map[string]string
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "herald listening" {
			continue
		}
		if want := map[string]string{"engine": engine, "node_id": n.name, "url": url}; fmt.Sprint(rec.Cluster) != fmt.Sprint(want) {
			t.Errorf("%s: start line's cluster %v, want %v", n.name, rec.Cluster, want)
		}
		return
	}
	t.Errorf("%s: no start line in\n%s", n.name, n.logs.String())
}

// restApp signs the REST calls: the nodes run the built-in development app.
var restApp = &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret"}

// publish triggers event "tick" on channel through the node's REST API.
func (n *node) publish(t *testing.T, channel, data string) (int, http.Header, []byte) {
	t.Helper()
	path := "/apps/" + restApp.ID + "/events"
	body, _ := json.Marshal(map[string]string{"name": "tick", "channel": channel, "data": data})
	q := pusher.SignRequest(restApp, "POST", path, nil, body, time.Now())
	resp, err := n.client.Post("http://"+n.api+path+"?"+q.Encode(), "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s: publish: %v", n.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// subscriber is a raw WebSocket client subscribed to a channel, whose messages a goroutine
// reads into msgs until the connection closes.
type subscriber struct {
	node *node
	msgs chan wstest.Message
}

func subscribe(t *testing.T, n *node, channel string) *subscriber {
	t.Helper()
	c, err := wstest.Dial(n.api, "/app/"+restApp.Key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SocketID(clusterWait); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(channel, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", clusterWait); err != nil {
		t.Fatal(err)
	}
	s := &subscriber{node: n, msgs: make(chan wstest.Message, 64)}
	go func() {
		defer close(s.msgs)
		for {
			m, err := c.Read(time.Hour) // until the connection closes
			if err != nil {
				return
			}
			s.msgs <- m
		}
	}()
	t.Cleanup(func() {
		c.Close()
		for range s.msgs { // until the reader has returned
		}
	})
	return s
}

// attemptWait is how long one publish of deliver waits for its event before publishing again:
// the bus is at most once, and the subscriber's node may still be taking its interest to the
// bus when the first one goes out.
const attemptWait = 2 * time.Second

// deliver publishes on from until one of its events reaches s (on another node).
func deliver(t *testing.T, from *node, s *subscriber, channel string) {
	t.Helper()
	attempt := 0
	poll.NoError(t, clusterWait, fmt.Sprintf("a publish on %s to reach a subscriber on %s", from.name, s.node.name), func() error {
		attempt++
		data := fmt.Sprintf("attempt %d", attempt)
		if status, _, body := from.publish(t, channel, data); status != http.StatusOK {
			return fmt.Errorf("publish %q: status %d, body %s", data, status, body)
		}
		timeout := time.NewTimer(attemptWait)
		defer timeout.Stop()
		for {
			select {
			case m, ok := <-s.msgs:
				if !ok {
					t.Fatalf("the subscriber on %s was disconnected", s.node.name)
				}
				if m.Close != 0 {
					t.Fatalf("the subscriber on %s was closed with %d", s.node.name, m.Close)
				}
				if m.Event == "tick" && m.Channel == channel {
					return nil
				}
			case <-timeout.C:
				return errors.New(data + " not received within " + attemptWait.String())
			}
		}
	})
}
