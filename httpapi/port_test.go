package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// These tests serve the API the way cmd/herald does: a real session server behind httpapi.New, on an
// httpapi.Port over a loopback listener, and the metrics on a Port of their own. They attack
// it over real sockets.

// portEnv is one node on loopback.
type portEnv struct {
	t       testing.TB
	app     *herald.App
	node    *session.Server
	port    *httpapi.Port
	addr    string // the API port
	metrics string // the metrics port
}

func newPortEnv(t testing.TB, pc httpapi.PortConfig, ac httpapi.Config, maxConns int) *portEnv {
	t.Helper()
	apps := herald.NewStaticApps([]herald.App{{ID: "1", Key: "key-one", Secret: "secret-one"}})
	h, err := session.New(session.Config{Workers: 2, MaxConnections: maxConns}, apps, cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	health := func() httpapi.HealthReport {
		st := h.Stats()
		return httpapi.HealthReport{Status: "ok", Connections: httpapi.Capacity{Current: st.Connections, Max: st.MaxConnections}, Channels: st.Channels, Version: "v1.2.3"}
	}
	reg := metrics.New("herald_", []string{"1"})
	reg.Attach("herald_", serverConnections{h})
	e := &portEnv{t: t, node: h}
	e.app, _ = apps.AppByID("1")
	api := httpapi.New(ac, apps, h, health, reg.HTTP, nil)
	e.port, e.addr = serveOn(t, pc, api)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	_, e.metrics = serveOn(t, httpapi.PortConfig{Name: "metrics", MaxConns: 8, RequestTimeout: 5 * time.Second}, mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	return e
}

// serverConnections is the node as metrics reads it, reduced to what these tests scrape (each
// app's connections); cmd/herald's nodeMetrics is the whole adapter.
type serverConnections struct{ h *session.Server }

func (c serverConnections) AppCounters() []metrics.AppCounters {
	var out []metrics.AppCounters
	for _, a := range c.h.AppMetrics() {
		out = append(out, metrics.AppCounters{AppID: a.AppID, Connections: a.Connections})
	}
	return out
}

func (c serverConnections) NodeStats() metrics.NodeStats {
	st := c.h.Stats()
	return metrics.NodeStats{Connections: st.Connections, MaxConnections: st.MaxConnections, Channels: st.Channels}
}

// serveOn serves h on a Port over a fresh loopback listener until the test ends.
func serveOn(t testing.TB, pc httpapi.PortConfig, h http.Handler) (*httpapi.Port, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := httpapi.NewPort(ln, pc, nil)
	srv := port.Server(h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(port)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	})
	return port, ln.Addr().String()
}

// signedPath is path with a query signed for app now; the request may be sent with body.
func signedPath(app *herald.App, method, path, body string) string {
	return path + "?" + pusher.SignRequest(app, method, path, nil, []byte(body), time.Now()).Encode()
}

// fresh is an HTTP client that opens a new connection for every request.
var fresh = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// get fetches url and returns its status and body.
func get(url string) (int, string, error) {
	resp, err := fresh.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// issuePath is the slow-body attack's request: unsigned, a valid signature was never needed to
// hold the socket.
const issuePath = "/apps/1/events?auth_key=key-one&auth_timestamp=1&auth_version=1.0&body_md5=x&auth_signature=y"

// slowBody opens one socket of the slow-body attack: a POST to path that announces 1000 bytes of
// body and sends 10.
func slowBody(addr, path string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	req := "POST " + path + " HTTP/1.1\r\n" +
		"Host: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n0123456789"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// watchClosed reads c until the server closes it and then marks it closed; bytes the
// server answers with are skipped.
func watchClosed(c net.Conn, closed *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	_, _ = io.Copy(io.Discard, c)
	closed.Add(1)
}

// TestSlowBodyFlood is the slow-body denial of service, at a scale that fits a test: many sockets
// each announce a body and trickle it, half with the attack's unsigned query (refused before the
// body now) and half with a captured signed query, replayed (held until the request deadline, or
// evicted for room). The port's cap, the early refusal and the whole-request deadline must keep
// /health, the metrics port, new WebSocket clients and signed publishes working while it lasts, and
// close every slow socket. Before the fix the trickling sockets were held open forever (only
// headers had a deadline).
func TestSlowBodyFlood(t *testing.T) {
	const attackers = 400
	e := newPortEnv(t, httpapi.PortConfig{Name: "api", MaxConns: 32, HeaderTimeout: time.Second, RequestTimeout: 2 * time.Second}, httpapi.Config{}, 100)
	sub, err := wstest.Dial(e.addr, "/app/key-one?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.SocketID(wait); err != nil {
		t.Fatal(err)
	}
	if err := sub.Subscribe("flood", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Expect("pusher_internal:subscription_succeeded", wait); err != nil {
		t.Fatal(err)
	}

	var closed atomic.Int64
	var wg sync.WaitGroup
	var conns []net.Conn
	captured := signedPath(e.app, "POST", "/apps/1/events", strings.Repeat("x", 1000))
	for i := range attackers {
		path := issuePath
		if i%2 == 1 {
			path = captured
		}
		c, err := slowBody(e.addr, path)
		if err != nil {
			t.Fatalf("attacker %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go watchClosed(c, &closed, &wg)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	// Trickle one byte per socket every 500 ms, faster than any idle timeout would allow.
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
					_, _ = c.Write([]byte("x"))
				}
			}
		}
	}()

	// During the flood: every legitimate request is served.
	if st := e.port.Stats(); st.Open > st.Max {
		t.Fatalf("port holds %d connections, over its cap of %d", st.Open, st.Max)
	}
	poll.NoError(t, 20*time.Second, "/health to answer 200 during the flood", func() error {
		code, body, err := get("http://" + e.addr + "/health")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d: %s", code, body)
		}
		return err
	})
	poll.NoError(t, 20*time.Second, "the metrics port to answer during the flood", func() error {
		code, body, err := get("http://" + e.metrics + "/metrics")
		if err == nil && (code != http.StatusOK || !strings.Contains(body, "herald_connected")) {
			err = fmt.Errorf("status %d, %d bytes", code, len(body))
		}
		return err
	})
	poll.NoError(t, 20*time.Second, "a new WebSocket client to connect during the flood", func() error {
		cl, err := wstest.Dial(e.addr, "/app/key-one?protocol=7")
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = cl.SocketID(wait)
		return err
	})
	body := `{"name":"tick","channel":"flood","data":"during"}`
	poll.NoError(t, 20*time.Second, "a signed publish to be accepted during the flood", func() error {
		resp, err := fresh.Post("http://"+e.addr+signedPath(e.app, "POST", "/apps/1/events", body), "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return nil
	})
	expectEvent(t, sub, "tick", "flood", "during")

	// Every slow socket is closed: evicted for room, or cut off at the request deadline.
	poll.NoError(t, 30*time.Second, "every slow socket to be closed", func() error {
		if n := closed.Load(); n < attackers {
			return fmt.Errorf("%d of %d closed; port %+v", n, attackers, e.port.Stats())
		}
		return nil
	})
	poll.NoError(t, wait, "the port to count no connection but the idle ones", func() error {
		if st := e.port.Stats(); st.Open-st.Idle != 0 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	t.Logf("port after the flood: %+v", e.port.Stats())
}

// rawRequest sends head (request line and headers, without the blank line) and a first part
// of the body on a new connection.
func rawRequest(t *testing.T, addr, head, body string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+"\r\nHost: "+addr+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAnswer reads one response from c within d.
func readAnswer(t *testing.T, c net.Conn, d time.Duration) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", d, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// expectClosed waits until the server closes c.
func expectClosed(t *testing.T, c net.Conn, what string, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: still open after %v", what, d)
	}
}

// expectOpen checks that the server has not closed c.
func expectOpen(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: closed or answered (%v), want it still waiting", what, err)
	}
}

// TestRefusedBeforeTheBody checks that the app and the signature are checked from the query
// before a byte of the body is read: the answer comes while the announced body has not
// arrived, and the connection is then closed. Before the fix the server waited for the
// whole body first, so an unsigned request could hold its socket as long as it trickled.
func TestRefusedBeforeTheBody(t *testing.T) {
	e := newPortEnv(t, httpapi.PortConfig{RequestTimeout: time.Minute}, httpapi.Config{MaxBodyBytes: 4096}, 100)
	body := `{"name":"e","channel":"c","data":"d"}`
	for _, tc := range []struct {
		name, path string
		length     int
		status     int
	}{
		{"bad signature", "/apps/1/events?auth_key=key-one&auth_timestamp=1&auth_version=1.0&body_md5=x&auth_signature=y", 1000, 401},
		{"no signature", "/apps/1/events", 1000, 401},
		{"unknown app", "/apps/9/events?auth_key=key-one", 1000, 404},
		{"expired timestamp", "/apps/1/events?" + pusher.SignRequest(e.app, "POST", "/apps/1/events", nil, []byte(body), time.Now().Add(-time.Hour)).Encode(), len(body), 401},
		{"body over the limit", signedPath(e.app, "POST", "/apps/1/events", strings.Repeat("x", 5000)), 5000, 413},
		{"no route", "/nowhere", 1000, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawRequest(t, e.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nContent-Length: %d", tc.path, tc.length), "0123456789")
			start := time.Now()
			resp, b := readAnswer(t, c, 10*time.Second)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.status)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("answered after %v", took)
			}
			expectClosed(t, c, "connection after an early refusal", 10*time.Second)
		})
	}
	t.Run("body_md5 checked after the body", func(t *testing.T) {
		other := `{"name":"e","channel":"c","data":"other"}`
		c := rawRequest(t, e.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nContent-Length: %d", signedPath(e.app, "POST", "/apps/1/events", body), len(other)), other)
		resp, b := readAnswer(t, c, 10*time.Second)
		if resp.StatusCode != 401 || !strings.Contains(b, "body_md5") {
			t.Fatalf("status %d (%s), want 401 body_md5 mismatch", resp.StatusCode, b)
		}
	})
	t.Run("signed request waits for its body", func(t *testing.T) {
		c := rawRequest(t, e.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nContent-Length: %d", signedPath(e.app, "POST", "/apps/1/events", body), len(body)), body[:10])
		expectOpen(t, c, "signed request with half its body")
		if _, err := io.WriteString(c, body[10:]); err != nil {
			t.Fatal(err)
		}
		if resp, b := readAnswer(t, c, 10*time.Second); resp.StatusCode != 200 {
			t.Fatalf("status %d (%s), want 200", resp.StatusCode, b)
		}
	})
}

// TestPortEvictsIdleThenSlowest fills a port of three and checks whom a new connection
// replaces: the keep-alive connection idle longest, else the connection longest in its
// request; and that it is served.
func TestPortEvictsIdleThenSlowest(t *testing.T) {
	e := newPortEnv(t, httpapi.PortConfig{MaxConns: 3, RequestTimeout: time.Minute, IdleTimeout: time.Minute}, httpapi.Config{}, 100)
	body := `{"name":"e","channel":"c","data":"d"}`
	slow := func() net.Conn {
		return rawRequest(t, e.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nContent-Length: %d", signedPath(e.app, "POST", "/apps/1/events", body), len(body)), body[:5])
	}
	waitStats := func(open, idle int) {
		t.Helper()
		poll.NoError(t, wait, fmt.Sprintf("the port to hold %d connections, %d idle", open, idle), func() error {
			if st := e.port.Stats(); st.Open != open || st.Idle != idle {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
	}
	health := func(c net.Conn) {
		t.Helper()
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, b := readAnswer(t, c, 10*time.Second); resp.StatusCode != 200 {
			t.Fatalf("/health: %d %s", resp.StatusCode, b)
		}
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	idle := dial()
	health(idle) // now idle in keep-alive
	b1, b2 := slow(), slow()
	waitStats(3, 1)
	c := dial()
	health(c) // takes the idle connection's place
	expectClosed(t, idle, "the idle keep-alive connection", wait)
	expectOpen(t, b1, "the first slow request")
	expectOpen(t, b2, "the second slow request")

	c.Close()
	waitStats(2, 0) // the server has seen c go
	b3 := slow()
	waitStats(3, 0)
	d := dial()
	health(d) // no idle one left: takes the place of the oldest slow request
	expectClosed(t, b1, "the oldest slow request", wait)
	expectOpen(t, b2, "the second slow request")
	expectOpen(t, b3, "the third slow request")
	if st := e.port.Stats(); st.EvictedIdle != 1 || st.EvictedBusy != 1 || st.Refused != 0 {
		t.Errorf("stats %+v, want one idle and one busy eviction", st)
	}
}

// TestIdleKeepAliveClosed checks the keep-alive idle timeout (it was a fixed 120 s).
func TestIdleKeepAliveClosed(t *testing.T) {
	e := newPortEnv(t, httpapi.PortConfig{IdleTimeout: 300 * time.Millisecond}, httpapi.Config{}, 100)
	c := rawRequest(t, e.addr, "GET /health HTTP/1.1", "")
	if resp, _ := readAnswer(t, c, wait); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("status %d close %v, want a keep-alive 200", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	expectClosed(t, c, "an idle keep-alive connection", wait)
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout", took)
	}
	if st := e.port.Stats(); st.TimedOut != 0 {
		t.Errorf("stats %+v: the idle timeout counted as a request timeout", st)
	}
}

// TestRequestTimeoutsCounted: a connection closed because its request's headers, or its
// body, did not arrive in time is counted (net/http closes it without a word; a client then
// sees its WebSocket handshake end in EOF), and the requests served are not.
func TestRequestTimeoutsCounted(t *testing.T) {
	e := newPortEnv(t, httpapi.PortConfig{HeaderTimeout: 300 * time.Millisecond, RequestTimeout: 600 * time.Millisecond}, httpapi.Config{}, 100)
	ok := rawRequest(t, e.addr, "GET /health HTTP/1.1", "")
	if resp, b := readAnswer(t, ok, wait); resp.StatusCode != 200 {
		t.Fatalf("/health: %d %s", resp.StatusCode, b)
	}
	silent, err := net.Dial("tcp", e.addr) // sends nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	half, err := net.Dial("tcp", e.addr) // half an upgrade's headers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { half.Close() })
	if _, err := io.WriteString(half, "GET /app/key-one HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	body := `{"name":"e","channel":"c","data":"d"}`
	slowBody := rawRequest(t, e.addr, fmt.Sprintf("POST %s HTTP/1.1\r\nContent-Length: %d", signedPath(e.app, "POST", "/apps/1/events", body), len(body)), body[:5])
	expectClosed(t, silent, "a connection that sent nothing", wait)
	expectClosed(t, half, "a connection that sent half its headers", wait)
	expectClosed(t, slowBody, "a request whose body stopped", wait)
	poll.NoError(t, wait, "three request timeouts counted", func() error {
		if st := e.port.Stats(); st.TimedOut != 3 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
}

// TestEventChannelsDeduplicated: an event naming one channel 100 times reaches each
// subscriber once (it was delivered 100 times).
func TestEventChannelsDeduplicated(t *testing.T) {
	e := newEnv(t)
	cl, _ := e.subscriber("dup")
	other, _ := e.subscriber("other")
	chans := make([]string, 100)
	for i := range chans {
		chans[i] = "dup"
	}
	chans[50] = "other"
	status, b := e.call("POST", "/apps/1/events", url.Values{}, eventBody(t, map[string]any{"name": "once", "channels": chans, "data": "1", "info": "subscription_count"}))
	e.wantOK(status, b, `{"channels":{"dup":{"subscription_count":1},"other":{"subscription_count":1}}}`)
	status, b = e.call("POST", "/apps/1/events", nil, eventBody(t, map[string]any{"name": "next", "channel": "dup", "data": "2"}))
	e.wantOK(status, b, `{}`)
	expectEvent(t, cl, "once", "dup", "1")
	expectEvent(t, cl, "next", "dup", "2")
	expectEvent(t, other, "once", "other", "1")
}

// TestReadyAtMaxConnections: /ready answers 503 "full" while the node holds max_connections
// (it stayed 200), and 200 again below.
func TestReadyAtMaxConnections(t *testing.T) {
	e := newPortEnv(t, httpapi.PortConfig{}, httpapi.Config{}, 2)
	var cls []*wstest.Client
	for range 2 {
		cl, err := wstest.Dial(e.addr, "/app/key-one?protocol=7")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.SocketID(wait); err != nil {
			t.Fatal(err)
		}
		cls = append(cls, cl)
	}
	code, body, err := get("http://" + e.addr + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/ready at max_connections: %d %s, want 503", code, body)
	}
	wantJSON(t, []byte(body), `{"ready":false,"status":"full"}`)
	_, body, _ = get("http://" + e.addr + "/health")
	wantJSON(t, []byte(body), `{"status":"full","connections":{"current":2,"max":2},"channels":0}`)
	cls[0].Close()
	poll.NoError(t, wait, "/ready to answer 200 below max_connections", func() error {
		code, body, err := get("http://" + e.addr + "/ready")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d %s", code, body)
		}
		return err
	})
}

// TestReplayProtection: with rest_replay_protection a signed request is accepted once; off,
// it can be replayed within the window, as on Pusher.
func TestReplayProtection(t *testing.T) {
	body := `{"name":"e","channel":"c","data":"d"}`
	send := func(e *portEnv, path string) (int, string) {
		resp, err := fresh.Post("http://"+e.addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	on := newPortEnv(t, httpapi.PortConfig{}, httpapi.Config{ReplayProtection: true}, 100)
	path := signedPath(on.app, "POST", "/apps/1/events", body)
	if code, b := send(on, path); code != 200 {
		t.Fatalf("first request: %d %s", code, b)
	}
	if code, b := send(on, path); code != 401 || !strings.Contains(b, "replayed") {
		t.Fatalf("replayed request: %d %s, want 401 replayed", code, b)
	}
	later := "/apps/1/events?" + pusher.SignRequest(on.app, "POST", "/apps/1/events", nil, []byte(body), time.Now().Add(time.Second)).Encode()
	if code, b := send(on, later); code != 200 {
		t.Fatalf("a request signed afresh: %d %s", code, b)
	}

	off := newPortEnv(t, httpapi.PortConfig{}, httpapi.Config{}, 100)
	path = signedPath(off.app, "POST", "/apps/1/events", body)
	for i := range 2 {
		if code, b := send(off, path); code != 200 {
			t.Fatalf("request %d without replay protection: %d %s", i, code, b)
		}
	}
}

// TestPortNeverEvictsServing: a request that has arrived whole and is being served is never
// evicted for room; when every connection is such, the new connection is closed unserved and
// counted as refused.
func TestPortNeverEvictsServing(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			_, _ = io.ReadAll(r.Body)
			started.Done()
			<-release
		}
		_, _ = io.WriteString(w, "done")
	})
	// The late connection waits RequestTimeout for a place before it is refused; no write
	// deadline, so the blocked handlers can answer after it.
	port, addr := serveOn(t, httpapi.PortConfig{MaxConns: 2, RequestTimeout: 2 * time.Second, WriteTimeout: -1}, h)
	busy := []net.Conn{
		rawRequest(t, addr, "GET /block HTTP/1.1", ""),
		rawRequest(t, addr, "POST /block HTTP/1.1\r\nContent-Length: 4", "body"),
	}
	started.Wait()
	late := rawRequest(t, addr, "GET /late HTTP/1.1", "")
	expectClosed(t, late, "a connection beyond the cap while both are being served", wait)
	if st := port.Stats(); st.Refused != 1 || st.EvictedBusy != 0 || st.EvictedIdle != 0 {
		t.Fatalf("stats %+v, want one refusal and no eviction", st)
	}
	close(release)
	for i, c := range busy {
		if resp, b := readAnswer(t, c, wait); resp.StatusCode != 200 || b != "done" {
			t.Fatalf("served request %d: %d %q", i, resp.StatusCode, b)
		}
	}
}

// TestPortBurstWaitsInsteadOfEvicting: connections that have just arrived and not yet sent
// their request (a burst of WebSocket upgrades on a busy machine looks like this) are not cut
// to admit newer ones before EvictAfter: the newcomer waits in the kernel's queue until a
// place frees, and every request is served. (Evicting at once cost 18 of 300 pusher clients
// dialling together their connection.)
func TestPortBurstWaitsInsteadOfEvicting(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok "+r.URL.Path) })
	port, addr := serveOn(t, httpapi.PortConfig{MaxConns: 2, RequestTimeout: time.Minute, EvictAfter: time.Minute}, h)
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first, second := dial(), dial() // connected, request not sent yet
	poll.NoError(t, wait, "the port to hold the two silent connections", func() error {
		if st := port.Stats(); st.Open != 2 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	third := dial()
	if _, err := io.WriteString(third, "GET /third HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	for i, c := range []net.Conn{first, second} {
		if _, err := fmt.Fprintf(c, "GET /c%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", i); err != nil {
			t.Fatal(err)
		}
		if resp, b := readAnswer(t, c, wait); resp.StatusCode != 200 || b != fmt.Sprintf("ok /c%d", i) {
			t.Fatalf("connection %d, silent at first: %d %q", i, resp.StatusCode, b)
		}
	}
	if resp, b := readAnswer(t, third, wait); resp.StatusCode != 200 || b != "ok /third" {
		t.Fatalf("the connection that waited for a place: %d %q", resp.StatusCode, b)
	}
	if st := port.Stats(); st.EvictedBusy != 0 || st.Refused != 0 {
		t.Fatalf("stats %+v: want no eviction and no refusal", st)
	}
}

// emfileListener fails its next accepts with EMFILE, as a process out of descriptors does.
type emfileListener struct {
	net.Listener
	fail atomic.Int64
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fail.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestPortOutOfDescriptors: an accept that fails for want of a descriptor (the slow-body attack
// filled the log with them) frees one by evicting an idle connection, is counted, and the port goes on
// serving instead of returning the error to net/http.
func TestPortOutOfDescriptors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	el := &emfileListener{Listener: ln}
	port := httpapi.NewPort(el, httpapi.PortConfig{MaxConns: 8}, nil)
	srv := port.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(port) }()
	defer func() {
		srv.Close()
		<-done
	}()
	idle := rawRequest(t, ln.Addr().String(), "GET / HTTP/1.1", "")
	if resp, _ := readAnswer(t, idle, wait); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	poll.NoError(t, wait, "the first connection to be idle", func() error {
		if st := port.Stats(); st.Idle != 1 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	// Serve is blocked in an accept already: the shortage hits the accept after the next one.
	el.fail.Store(1)
	c := rawRequest(t, ln.Addr().String(), "GET / HTTP/1.1", "")
	if resp, _ := readAnswer(t, c, wait); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	expectClosed(t, idle, "the idle connection evicted for a descriptor", wait)
	d := rawRequest(t, ln.Addr().String(), "GET / HTTP/1.1", "")
	if resp, _ := readAnswer(t, d, wait); resp.StatusCode != 200 {
		t.Fatalf("status %d after the descriptor shortage", resp.StatusCode)
	}
	if st := port.Stats(); st.FDShortages != 1 || st.EvictedIdle != 1 {
		t.Fatalf("stats %+v, want one shortage and the idle connection evicted", st)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned during the shortage: %v", err)
	default:
	}
}
