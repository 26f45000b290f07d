//go:build linux

package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/herald-rt/herald"
)

// nodePort is the port a node listens on inside its namespace (on loopback each node gets a
// free one).
const nodePort = 6001

// startWait bounds a process's start: from exec until it answers. Generous: the machines
// are busy, and a node restarted while its bus is down still answers /health at once.
const startWait = time.Minute

// node is one herald process.
type node struct {
	i    int    // from 1
	name string // node-1
	addr string // host:port its clients and publishers reach it at
	proc *proc
}

// app is the run's one app; its channels chaos-* keep history.
func newApp() *herald.App {
	return &herald.App{ID: "chaos", Key: "chaos-key", Secret: randomHex(16)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nodeConfig is the YAML every node of the run reads; each node's address, id and bus URL
// come as flags.
type nodeConfig struct {
	app      *herald.App
	history  int    // the history rule's size
	secret   string // cluster.secret (a single node ignores it)
	activity time.Duration
	kafka    string // a Kafka broker's host:port to ingest from, or ""
	topic    string
}

func (c nodeConfig) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "activity_timeout: %s\n", c.activity)
	fmt.Fprintf(&b, "publish:\n  idempotency_window: 10m\n")
	fmt.Fprintf(&b, "metrics:\n  enabled: false\n")
	fmt.Fprintf(&b, "log:\n  format: json\n")
	if c.secret != "" {
		fmt.Fprintf(&b, "cluster:\n  secret: %q\n", c.secret)
	}
	fmt.Fprintf(&b, "apps:\n  - id: %q\n    key: %q\n    secret: %q\n", c.app.ID, c.app.Key, c.app.Secret)
	fmt.Fprintf(&b, "    history:\n      - {channels: \"chaos-*\", size: %d, ttl: 1h}\n", c.history)
	if c.kafka != "" {
		fmt.Fprintf(&b, "ingest:\n  - name: chaos-kafka\n    app: %q\n", c.app.ID)
		fmt.Fprintf(&b, "    kafka: {brokers: [%q], topics: [%q], group: herald-chaos, start: earliest}\n", c.kafka, c.topic)
		fmt.Fprintf(&b, "    channel: \"{key}\"\n    event: chaos\n    data: \"{value}\"\n")
	}
	return b.String()
}

// newNode prepares node i (it does not start it): herald serve with the config file at cfg,
// listening at host:port, on the bus at url ("" on a single node).
func newNode(nw *network, dir, bin, cfg string, i int, port int, url string) *node {
	n := &node{i: i, name: "node-" + strconv.Itoa(i), addr: nw.nodeHost(i) + ":" + strconv.Itoa(port)}
	args := []string{bin, "serve", "--config", cfg, "--host", nw.listenHost(), "--port", strconv.Itoa(port),
		"--shutdown-drain-delay", "0s", "--shutdown-timeout", "5s"}
	if url != "" {
		args = append(args, "--cluster-url", url, "--cluster-node-id", n.name)
	}
	n.proc = &proc{name: n.name, argv: nw.inNode(i, args), log: filepath.Join(dir, n.name+".log")}
	return n
}

// start starts the node and returns once it answers /health (whatever its bus's state).
func (n *node) start(ctx context.Context) error {
	if err := n.proc.start(); err != nil {
		return err
	}
	return n.waitUp(ctx, startWait, func(health) error { return nil })
}

// health is the part of /health the harness reads: the status ("bus_down" while a cluster
// node is off its bus) and, from releases whose public /health had it, the bus's state.
type health struct {
	Status  string `json:"status"`
	Cluster *struct {
		Connected bool `json:"connected"`
	} `json:"cluster"`
}

var probeClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitUp polls /health until check accepts it, the process exits or within passes.
func (n *node) waitUp(ctx context.Context, within time.Duration, check func(health) error) error {
	deadline := time.Now().Add(within)
	exited := n.proc.exited()
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("%s exited; its log ends:\n%s", n.name, n.proc.logTail(2000))
		default:
		}
		if last = n.probe(ctx, check); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %v: %v", n.name, within, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // the polling interval while a node starts
		}
	}
}

func (n *node) probe(ctx context.Context, check func(health) error) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+n.addr+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Errorf("/health: %s: %w", resp.Status, err)
	}
	return check(h)
}

// connected accepts a node that is ok and, in a cluster, on its bus.
func connected(h health) error {
	if h.Status != "ok" || (h.Cluster != nil && !h.Cluster.Connected) {
		return fmt.Errorf("status %q, cluster %+v", h.Status, h.Cluster)
	}
	return nil
}

// writeFile writes a file of the run.
func writeFile(dir, name, text string) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(text), 0o600)
}
