package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// floodFDLimit is the open-file limit of the node TestServeSlowBodyFlood starts: small, so that a
// few more attack sockets than that exhaust it, as 19,990 exhausted 20,000 in the attack as first
// measured.
const floodFDLimit = 1024

// TestHelperServe is not a test: TestServeSlowBodyFlood and TestClusterNodes run the test
// binary again with HERALD_HELPER_SERVE set, and this runs `herald serve` with those flags
// under a lowered open-file limit.
func TestHelperServe(t *testing.T) {
	args := os.Getenv("HERALD_HELPER_SERVE")
	if args == "" {
		t.Skip("runs herald serve for TestServeSlowBodyFlood and TestClusterNodes")
	}
	if err := setOpenFileLimit(floodFDLimit); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(3)
	}
	// No drain delay unless the test asks for one: its nodes stop at once on SIGTERM.
	os.Exit(serve(append([]string{"--shutdown-drain-delay", "0"}, strings.Fields(args)...), func(string) string { return "" }, os.Stderr, false))
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a log both the child's output and the test may touch.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeSlowBodyFlood reproduces the slow-body attack against `herald serve` itself, scaled to a
// node with 1,024 descriptors: 1,500 sockets (more than the node's descriptors) each send an
// unsigned POST with Content-Length 1000 and 10 bytes of body, and a further 1,500 a captured
// signed one, then trickle a byte each every 500 ms, while 40 more trickle headers into the metrics
// port. Before the descriptor budget the node ran out of them: /health, the metrics port, new
// WebSocket clients and publishes hung. Now they must keep working, every slow socket must be
// closed, and /health must report the WebSocket capacity the descriptor budget leaves
// (limit − 100 − 256 HTTP − 16 metrics).
func TestServeSlowBodyFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of 3,000 sockets")
	}
	port, mport := freePort(t), freePort(t)
	addr, maddr := "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(mport)
	var health struct {
		Status      string
		Connections struct{ Current, Max int }
	}
	logs := serveHelper(t, addr, fmt.Sprintf("--port %d --metrics-port %d --handshake-timeout 1s --rest-request-timeout 2s --log-level warn", port, mport), &health)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	if want := floodFDLimit - fdReserve - 256 - 16; health.Connections.Max != want {
		t.Errorf("/health max %d, want %d: the open-file limit less the reserve, the HTTP and the metrics connections", health.Connections.Max, want)
	}

	app := &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret"}
	sub, err := wstest.Dial(addr, "/app/app-key?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.SocketID(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sub.Subscribe("flood", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Expect("pusher_internal:subscription_succeeded", 10*time.Second); err != nil {
		t.Fatal(err)
	}

	// The attack: the slow-body attack's unsigned request, and a captured signed one.
	unsigned := "/apps/app-id/events?auth_key=app-key&auth_timestamp=1&auth_version=1.0&body_md5=x&auth_signature=y"
	captured := "/apps/app-id/events?" + pusher.SignRequest(app, "POST", "/apps/app-id/events", nil, bytes.Repeat([]byte("x"), 1000), time.Now()).Encode()
	var closed atomic.Int64
	var wg sync.WaitGroup
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	open := func(addr, req string) {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("attack socket %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		_, _ = io.WriteString(c, req) // the server may have closed it already
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(io.Discard, c)
			closed.Add(1)
		}()
	}
	const attackers = 3000
	for i := range attackers {
		path := unsigned
		if i%2 == 1 {
			path = captured
		}
		open(addr, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
	}
	for range 40 {
		open(maddr, "GET /metrics HTTP/1.1\r\n")
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, c := range conns {
					_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
					_, _ = c.Write([]byte("x"))
				}
			}
		}
	}()

	// During the flood.
	check := func(url string) func() error {
		return func() error {
			resp, err := client.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
			}
			return nil
		}
	}
	poll.NoError(t, 20*time.Second, "/health during the flood", check("http://"+addr+"/health"))
	poll.NoError(t, 20*time.Second, "/metrics during the flood", check("http://"+maddr+"/metrics"))
	poll.NoError(t, 20*time.Second, "a new WebSocket client during the flood", func() error {
		cl, err := wstest.Dial(addr, "/app/app-key?protocol=7")
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = cl.SocketID(5 * time.Second)
		return err
	})
	body := `{"name":"tick","channel":"flood","data":"during"}`
	poll.NoError(t, 20*time.Second, "a signed publish during the flood", func() error {
		q := pusher.SignRequest(app, "POST", "/apps/app-id/events", nil, []byte(body), time.Now())
		resp, err := client.Post("http://"+addr+"/apps/app-id/events?"+q.Encode(), "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return nil
	})
	for {
		m, err := sub.Read(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the event published during the flood: %v", err)
		}
		if m.Event == "tick" {
			break
		}
	}

	// Every slow socket is closed, and the node never ran short of descriptors.
	poll.NoError(t, 60*time.Second, "every slow socket to be closed", func() error {
		if n := closed.Load(); n < int64(len(conns)) {
			return fmt.Errorf("%d of %d closed", n, len(conns))
		}
		return nil
	})
	poll.NoError(t, 20*time.Second, "herald_http_connections to fall to 0", func() error {
		resp, err := client.Get("http://" + maddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "herald_http_connections "); ok {
				if v != "0" {
					return errors.New("herald_http_connections " + v)
				}
				return nil
			}
		}
		return errors.New("no herald_http_connections in /metrics")
	})
	if strings.Contains(logs.String(), "too many open files") {
		t.Errorf("herald ran out of descriptors:\n%s", logs.String())
	}
}
