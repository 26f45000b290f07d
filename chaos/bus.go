//go:build linux

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// bus is the servers of a cluster's bus: one redis-server, or a cluster of nats-servers.
type bus struct {
	servers []*busServer
	// url is node i's cluster.url (a NATS cluster's URLs start with server i's).
	url func(i int) string
	// formed reports nil once the servers that run form a working bus (a NATS cluster: routed
	// and agreeing on a JetStream meta leader).
	formed func() error
}

// busServer is one bus server process on addr.
type busServer struct {
	name  string
	addr  string
	data  string // its data directory
	proc  *proc
	ready func() error // answers nil once the server serves
}

// start starts the server and waits until it answers.
func (s *busServer) start(ctx context.Context) error {
	if err := s.proc.start(); err != nil {
		return err
	}
	return poll(ctx, startWait, s.proc.exited(), func() error { return s.ready() },
		func() string { return s.name + "'s log ends:\n" + s.proc.logTail(2000) })
}

// poll calls f every 50 ms until it returns nil, ctx ends, within passes or exited is closed
// (then the error quotes what tail says).
func poll(ctx context.Context, within time.Duration, exited <-chan struct{}, f func() error, tail func() string) error {
	deadline := time.Now().Add(within)
	for {
		select {
		case <-exited:
			return fmt.Errorf("exited before it answered; %s", tail())
		default:
		}
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %v; %s", within, err, tail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // the polling interval while a server starts
		}
	}
}

// lookBinary finds a server's binary: the path given, else on PATH or in the usual places.
func lookBinary(given, name string) (string, error) {
	if given != "" {
		return given, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed: apt-get install -y redis-server nats-server", name)
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ports returns n distinct ports: fixed ones from base in the bus's own namespace, free ones
// of 127.0.0.1 on loopback.
func ports(nw *network, base, n int) ([]int, error) {
	var ps []int
	seen := map[int]bool{}
	for len(ps) < n {
		p := base + len(ps)
		if !nw.isolated {
			var err error
			if p, err = freePort(); err != nil {
				return nil, err
			}
			if seen[p] { // a port freed a moment ago may come back at once
				continue
			}
		}
		seen[p] = true
		ps = append(ps, p)
	}
	return ps, nil
}

// newRedis prepares a redis-server on the bus's address with the persistence aof asks.
func newRedis(nw *network, dir, bin, aof string) (*bus, error) {
	ps, err := ports(nw, 6379, 1)
	if err != nil {
		return nil, err
	}
	addr := nw.busHost() + ":" + strconv.Itoa(ps[0])
	data := filepath.Join(dir, "redis")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	args := []string{bin, "--bind", nw.busHost(), "--port", strconv.Itoa(ps[0]), "--dir", data,
		"--save", "", "--protected-mode", "no"}
	if aof == "off" {
		args = append(args, "--appendonly", "no")
	} else {
		args = append(args, "--appendonly", "yes", "--appendfsync", aof)
	}
	s := &busServer{name: "redis-server", addr: addr, data: data,
		proc:  &proc{name: "redis-server", argv: nw.inBus(args), log: filepath.Join(dir, "redis-server.log")},
		ready: func() error { return redisPing(addr) }}
	return &bus{servers: []*busServer{s},
		url:    func(int) string { return "redis://" + addr + "/0" },
		formed: func() error { return redisPing(addr) }}, nil
}

func redisPing(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// newNATS prepares a cluster of n nats-servers with JetStream on the bus's address, each
// routed to every other, with its store in dir.
func newNATS(nw *network, dir, bin, sync string, n int) (*bus, error) {
	ps, err := ports(nw, 4222, 3*n)
	if err != nil {
		return nil, err
	}
	host := nw.busHost()
	client, route, monitor := ps[:n], ps[n:2*n], ps[2*n:]
	b := &bus{}
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, "nats://"+host+":"+strconv.Itoa(route[j]))
			}
		}
		name := "nats-" + strconv.Itoa(i+1)
		args := []string{bin, "-a", host, "-p", strconv.Itoa(client[i]), "-m", strconv.Itoa(monitor[i]),
			"-cluster", "nats://" + host + ":" + strconv.Itoa(route[i]), "-routes", strings.Join(routes, ","),
			"-cluster_name", "herald-chaos", "-server_name", name, "-js", "-sd", filepath.Join(dir, name)}
		if sync != "" {
			// The command line's -sd is the store's directory; the file adds the sync.
			conf, err := writeFile(dir, name+".conf", fmt.Sprintf("jetstream {\n  sync_interval: %q\n}\n", sync))
			if err != nil {
				return nil, err
			}
			args = append(args, "-c", conf)
		}
		addr := host + ":" + strconv.Itoa(client[i])
		b.servers = append(b.servers, &busServer{name: name, addr: addr, data: filepath.Join(dir, name),
			proc:  &proc{name: name, argv: nw.inBus(args), log: filepath.Join(dir, name+".log")},
			ready: func() error { return natsInfo(addr) }})
	}
	b.url = func(i int) string {
		first := (i - 1) % n
		urls := []string{"nats://" + b.servers[first].addr}
		for j, s := range b.servers {
			if j != first {
				urls = append(urls, "nats://"+s.addr)
			}
		}
		return strings.Join(urls, ",")
	}
	b.formed = func() error { return natsFormed(b, host, monitor) }
	return b, nil
}

func natsInfo(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("server said %q", line)
	}
	return nil
}

// natsFormed returns nil when the running servers are routed to one another and agree on a
// running JetStream meta leader.
func natsFormed(b *bus, host string, monitor []int) error {
	running := map[string]bool{}
	for _, s := range b.servers {
		if s.proc.pid() != 0 {
			running[s.name] = true
		}
	}
	leader := ""
	for i, s := range b.servers {
		if !running[s.name] {
			continue
		}
		base := "http://" + host + ":" + strconv.Itoa(monitor[i])
		var routez struct {
			NumRoutes int `json:"num_routes"`
		}
		if err := getJSON(base+"/routez", &routez); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if routez.NumRoutes < len(running)-1 {
			return fmt.Errorf("%s has %d routes, want %d", s.name, routez.NumRoutes, len(running)-1)
		}
		var jsz struct {
			Meta *struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		if err := getJSON(base+"/jsz", &jsz); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		switch {
		case jsz.Meta == nil || jsz.Meta.Leader == "":
			return fmt.Errorf("%s knows no JetStream meta leader", s.name)
		case !running[jsz.Meta.Leader]:
			return fmt.Errorf("%s's meta leader %s is not running", s.name, jsz.Meta.Leader)
		case leader != "" && jsz.Meta.Leader != leader:
			return errors.New("the servers disagree on the meta leader")
		}
		leader = jsz.Meta.Leader
	}
	return nil
}

func getJSON(url string, v any) error {
	resp, err := probeClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
