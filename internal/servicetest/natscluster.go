package servicetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NATSCluster is a cluster of nats-servers with JetStream on loopback, each routed to every
// other (cluster name "herald", servers n1, n2, ...), each with its monitoring port. Each
// member is a Server: Stop kills it (kill -9), Start brings it back on the same ports with
// its JetStream store.
type NATSCluster struct {
	Servers []*Server
	cluster []int // each server's route port
	monitor []int // each server's monitoring port
}

// NATSClusterJetStream starts a cluster of n nats-servers with JetStream and returns once
// every server is routed to every other and JetStream has a meta leader.
func NATSClusterJetStream(t testing.TB, n int) *NATSCluster {
	t.Helper()
	return natsCluster(t, n, find(t, "nats-server"))
}

// natsCluster is NATSClusterJetStream of the nats-server at bin.
func natsCluster(t testing.TB, n int, bin string) *NATSCluster {
	t.Helper()
	var errs []string
	for attempt := 0; attempt < 3; attempt++ {
		c := &NATSCluster{}
		ports := map[int]bool{}
		for len(ports) < 3*n { // distinct: a port freed a moment ago may come back at once
			ports[freePort(t)] = true
		}
		var free []int
		for p := range ports {
			free = append(free, p)
		}
		for i := range n {
			c.cluster = append(c.cluster, free[3*i+1])
			c.monitor = append(c.monitor, free[3*i+2])
			s := &Server{Name: "nats-server", Port: free[3*i], bin: bin, args: c.args(i), ready: natsReady}
			s.proc = process{name: s.Name, dir: t.TempDir(), tail: 2000, every: 20 * time.Millisecond}
			t.Cleanup(s.proc.kill)
			c.Servers = append(c.Servers, s)
		}
		err := c.startAll()
		if err == nil {
			c.Wait(t)
			return c
		}
		for _, s := range c.Servers {
			s.proc.kill()
		}
		errs = append(errs, err.Error())
	}
	t.Fatalf("a NATS cluster did not start: %s", strings.Join(errs, "; "))
	return nil
}

func (c *NATSCluster) startAll() error {
	for _, s := range c.Servers {
		if err := s.run(); err != nil {
			return err
		}
	}
	return nil
}

// args is the command line of server i: its client, route and monitoring ports, routes to
// every other server, JetStream with its store in the server's directory.
func (c *NATSCluster) args(i int) func(port int, dir string) []string {
	return func(port int, dir string) []string {
		var routes []string
		for j, p := range c.cluster {
			if j != i {
				routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
			}
		}
		return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-m", strconv.Itoa(c.monitor[i]),
			"-cluster", "nats://127.0.0.1:" + strconv.Itoa(c.cluster[i]), "-routes", strings.Join(routes, ","),
			"-cluster_name", "herald", "-server_name", c.Name(i), "-js", "-sd", filepath.Join(dir, "jetstream")}
	}
}

// Name is server i's name in the cluster: n1, n2, ...
func (c *NATSCluster) Name(i int) string { return "n" + strconv.Itoa(i+1) }

// URL is every server's URL, comma-separated from server first (then the others in order):
// the form of herald's cluster.url for a NATS cluster, each node given a different first
// server.
func (c *NATSCluster) URL(first int) string {
	urls := []string{c.Servers[first].URL()}
	for i, s := range c.Servers {
		if i != first {
			urls = append(urls, s.URL())
		}
	}
	return strings.Join(urls, ",")
}

// Wait returns once every running server has a route to every other running server and
// reports the same JetStream meta leader, a running one; it fails t after Ready.
func (c *NATSCluster) Wait(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * Ready) // a meta leader election may take seconds more
	var last error
	for time.Now().Before(deadline) {
		if last = c.ready(); last == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // the polling interval while the cluster forms
	}
	t.Fatalf("the NATS cluster did not form within %v: %v", 2*Ready, last)
}

// ready returns nil when the running servers are routed to one another and agree on a
// running meta leader, else what is missing.
func (c *NATSCluster) ready() error {
	running := map[string]bool{}
	for i, s := range c.Servers {
		if s.proc.cmd != nil {
			running[c.Name(i)] = true
		}
	}
	leader := ""
	for i, s := range c.Servers {
		if s.proc.cmd == nil {
			continue
		}
		var routez struct {
			NumRoutes int `json:"num_routes"`
		}
		if err := c.monitorGet(i, "/routez", &routez); err != nil {
			return err
		}
		if routez.NumRoutes < len(running)-1 {
			return fmt.Errorf("%s has %d routes, want %d", c.Name(i), routez.NumRoutes, len(running)-1)
		}
		l, err := c.MetaLeader(i)
		switch {
		case err != nil:
			return err
		case l == "":
			return fmt.Errorf("%s knows no JetStream meta leader", c.Name(i))
		case !running[l]:
			return fmt.Errorf("%s's meta leader is %s, which is not running", c.Name(i), l)
		case leader != "" && l != leader:
			return fmt.Errorf("the servers disagree on the meta leader: %s and %s", leader, l)
		}
		leader = l
	}
	return nil
}

// MetaLeader is the JetStream meta leader as server i sees it ("" when it knows none).
func (c *NATSCluster) MetaLeader(i int) (string, error) {
	var jsz struct {
		Meta *struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
	}
	if err := c.monitorGet(i, "/jsz", &jsz); err != nil || jsz.Meta == nil {
		return "", err
	}
	return jsz.Meta.Leader, nil
}

// Monitor is server i's monitoring address, host:port.
func (c *NATSCluster) Monitor(i int) string { return "127.0.0.1:" + strconv.Itoa(c.monitor[i]) }

var monitorClient = &http.Client{Timeout: 5 * time.Second}

func (c *NATSCluster) monitorGet(i int, path string, v any) error {
	resp, err := monitorClient.Get("http://" + c.Monitor(i) + path)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Name(i), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s%s: %s", c.Name(i), path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s%s: %w", c.Name(i), path, err)
	}
	return nil
}

// natsReady reads a nats-server's INFO line.
func natsReady(c net.Conn) error {
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("INFO ")) {
		return fmt.Errorf("server said %q", line)
	}
	return nil
}

// Stop kills every server of the cluster (the whole bus lost), as Server.Stop does.
func (c *NATSCluster) Stop(t testing.TB) {
	t.Helper()
	for _, s := range c.Servers {
		s.Stop(t)
	}
}

// Start starts every server again on its ports, with its JetStream store, and returns once
// the cluster has formed again (Wait).
func (c *NATSCluster) Start(t testing.TB) {
	t.Helper()
	for _, s := range c.Servers {
		s.Start(t)
	}
	c.Wait(t)
}
