package servicetest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Ready bounds the wait for a started server to answer. It is generous: the test machines
// are shared.
const Ready = 30 * time.Second

// Server is one service process on 127.0.0.1:Port.
type Server struct {
	Name string // "redis-server", "nats-server"
	Port int

	tls   bool // a Redis server listening for TLS only (RedisTLS)
	bin   string
	args  func(port int, dir string) []string
	ready func(c net.Conn) error // reads the server's first answer on a new connection
	proc  process
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

func find(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin"} {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	if testing.Short() {
		t.Skipf("%s is not installed (-short: skipping; the full suite fails here)", name)
	}
	t.Fatalf("%s is not installed: apt-get update && apt-get install -y redis-server nats-server "+
		"(scripts/test.sh installs it when absent)", name)
	return ""
}

func fileExists(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// start runs a new server on a free port, trying other ports when the one picked was taken
// in the meantime, and registers its stop on cleanup.
func start(t testing.TB, s *Server) *Server {
	t.Helper()
	s.bin = find(t, s.Name)
	s.proc = process{name: s.Name, dir: t.TempDir(), tail: 2000, every: 20 * time.Millisecond}
	t.Cleanup(s.proc.kill)
	var errs []string
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(t)
		err := s.run()
		if err == nil {
			return s
		}
		errs = append(errs, err.Error())
	}
	t.Fatalf("%s did not start: %s", s.Name, strings.Join(errs, "; "))
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	port, err := anyPort()
	if err != nil {
		t.Fatalf("picking a free port: %v", err)
	}
	return port
}

// run starts the process on s.Port and waits until it answers or exits.
func (s *Server) run() error {
	return s.proc.run(s.Port, Ready, s.probe, append([]string{s.bin}, s.args(s.Port, s.proc.dir)...)...)
}

func (s *Server) probe() error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	return s.ready(c)
}

// Stop kills the server, as a crash would, and returns once the process has exited.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.proc.cmd == nil {
		t.Fatalf("%s on port %d: Stop while stopped", s.Name, s.Port)
	}
	s.proc.kill()
}

// Start starts the server again on the same port and returns once it answers. The port
// may be held for a moment by the old process's sockets; Start retries until Ready.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if s.proc.cmd != nil {
		t.Fatalf("%s on port %d: Start while running", s.Name, s.Port)
	}
	deadline := time.Now().Add(Ready)
	for {
		err := s.run()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarting %s on port %d: %v", s.Name, s.Port, err)
		}
		time.Sleep(100 * time.Millisecond) // before trying the port again
	}
}

// Redis starts a redis-server with no persistence on a free loopback port.
func Redis(t testing.TB) *Server {
	t.Helper()
	return start(t, &Server{Name: "redis-server",
		args: redisArgs,
		ready: func(c net.Conn) error {
			if _, err := c.Write([]byte("PING\r\n")); err != nil {
				return err
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return err
			}
			if !strings.HasPrefix(line, "+PONG") {
				return fmt.Errorf("PING answered %q", line)
			}
			return nil
		}})
}

// URL is the address in the form herald's cluster.url takes.
func (s *Server) URL() string {
	if s.Name == "redis-server" && s.tls {
		return "rediss://" + s.Addr() + "/0"
	}
	if s.Name == "redis-server" {
		return "redis://" + s.Addr() + "/0"
	}
	return "nats://" + s.Addr()
}

// NATS starts a nats-server on a free loopback port.
func NATS(t testing.TB) *Server {
	t.Helper()
	return natsServer(t, false)
}

// NATSJetStream starts a nats-server with JetStream on a free loopback port, its store in the
// test's temporary directory: a restart (Stop, Start) keeps the streams.
func NATSJetStream(t testing.TB) *Server {
	t.Helper()
	return natsServer(t, true)
}

func natsServer(t testing.TB, js bool) *Server {
	t.Helper()
	return start(t, &Server{Name: "nats-server",
		args: func(port int, dir string) []string {
			args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}
			if js {
				args = append(args, "-js", "-sd", filepath.Join(dir, "jetstream"))
			}
			return args
		},
		ready: natsReady})
}

// NATSAtLeast reports whether the nats-server the tests run is of release major.minor or
// later (`nats-server --version`).
func NATSAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	out, err := exec.Command(find(t, "nats-server"), "--version").Output()
	if err != nil {
		t.Fatalf("nats-server --version: %v", err)
	}
	v := strings.TrimSpace(string(out)) // "nats-server: v2.9.10"
	v = v[strings.LastIndexByte(v, 'v')+1:]
	var ma, mi int
	if _, err := fmt.Sscanf(v, "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("nats-server --version said %q: %v", out, err)
	}
	return ma > major || ma == major && mi >= minor
}
