package session_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

var app = &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret", EnableClientMessages: true,
	EnableUserAuthentication: true, Limits: herald.DefaultLimits}

// startServer runs a single node behind a real HTTP server on 127.0.0.1 and returns its
// address.
func startServer(t *testing.T, cfg session.Config) (*session.Server, string) {
	t.Helper()
	return startServerApps(t, cfg, app)
}

// startServerApps is startServer for other apps.
func startServerApps(t *testing.T, cfg session.Config, apps ...*herald.App) (*session.Server, string) {
	t.Helper()
	return startServerState(t, cfg, cluster.Config{}, apps...)
}

// startServerState is startServerApps with the single node's state configured by sc.
func startServerState(t *testing.T, cfg session.Config, sc cluster.Config, apps ...*herald.App) (*session.Server, string) {
	t.Helper()
	return serveNode(t, cfg, local(sc), apps...)
}

// local builds a single node's state, configured by sc.
func local(sc cluster.Config) session.NewState {
	return func(eng *fanout.Engine) cluster.State { return cluster.NewLocal(sc, eng) }
}

// serveNode runs a server of apps on the state newState builds, behind a real HTTP server on
// 127.0.0.1, and returns its address.
func serveNode(t *testing.T, cfg session.Config, newState session.NewState, apps ...*herald.App) (*session.Server, string) {
	t.Helper()
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 19000
	}
	h, err := session.New(cfg, storeOf(apps...), newState, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /app/{key}", func(w http.ResponseWriter, r *http.Request) { h.ServeWS(w, r, r.PathValue("key")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: patience}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		_ = h.Shutdown(t.Context())
	})
	return h, ln.Addr().String()
}

// storeOf is an AppStore of apps.
func storeOf(apps ...*herald.App) herald.AppStore {
	list := make([]herald.App, len(apps))
	for i, a := range apps {
		list[i] = *a
	}
	return herald.NewStaticApps(list)
}

// patience is how long a test waits for anything that normally takes milliseconds: a frame,
// a close, a count to settle. Tests run on busy machines (two cores shared with other builds,
// -race), so it is generous; a passing test never waits it out.
const patience = 30 * time.Second

func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

func presenceAuth(sid, channel, userID string) (auth, data string) {
	b, _ := json.Marshal(map[string]any{"user_id": userID, "user_info": map[string]string{"name": userID}})
	data = string(b)
	return app.Key + ":" + pusher.Sign(app.Secret, sid+":"+channel+":"+data), data
}

// connectSubscribed opens a connection, joins a public and a presence channel, and waits for
// both confirmations.
func connectSubscribed(addr string, i int) (*wstest.Client, error) {
	c, err := wstest.Dial(addr, "/app/app-key?protocol=7")
	if err != nil {
		return nil, err
	}
	sid, err := c.SocketID(patience)
	if err != nil {
		c.Close()
		return nil, err
	}
	auth, data := presenceAuth(sid, "presence-lc", fmt.Sprint("u", i%20))
	if err := c.Subscribe(fmt.Sprint("lc-", i%50), "", ""); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Subscribe("presence-lc", auth, data); err != nil {
		c.Close()
		return nil, err
	}
	for n := 0; n < 2; {
		m, err := c.Read(patience)
		if err != nil {
			c.Close()
			return nil, err
		}
		if m.Event == "pusher_internal:subscription_succeeded" {
			n++
		}
		if m.Event == "pusher:subscription_error" || m.Close != 0 {
			c.Close()
			return nil, fmt.Errorf("subscribe failed: %+v", m)
		}
	}
	return c, nil
}

// TestLifecycleReturnsToBaseline opens and closes 10,000 connections that end every way a
// connection can (clean close, reset, dropped mid-handshake, slow consumer) and checks that
// the server's connection and channel counts, the goroutines and the open descriptors all come
// back to where they started (docs/architecture.md rule 10).
func TestLifecycleReturnsToBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 connections")
	}
	h, addr := startServer(t, session.Config{Workers: 2, OutboundBufferBytes: 64 << 10})
	baseG, baseFD := runtime.NumGoroutine(), openFDs()

	const total, par = 9950, 10
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for g := 0; g < par; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < total; i += par {
				if err := oneLife(addr, i); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}(g)
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d connections failed; first: %v", n, total, firstErr.Load())
	}

	// Slow consumers: 50 subscribers that never read, with tiny receive buffers.
	const slow = 50
	var slowConns []net.Conn
	for i := 0; i < slow; i++ {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { _ = setsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := wstest.Handshake(nc, addr, "/app/app-key")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SocketID(patience); err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe("slow", "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			t.Fatal(err)
		}
		slowConns = append(slowConns, nc)
	}
	before := h.Stats().SlowConsumers
	big := strings.Repeat("x", 8000)
	for i := 0; i < 5000 && h.Stats().SlowConsumers-before < slow; i++ {
		if err := h.Publish(app.ID, herald.Event{Name: "flood", Channel: "slow", Data: big}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, patience, "slow consumers closed", func() (bool, string) {
		n := h.Stats().SlowConsumers - before
		return n == slow, fmt.Sprintf("%d of %d closed", n, slow)
	})
	for _, nc := range slowConns {
		nc.Close()
	}

	poll.Until(t, patience, "back to baseline", func() (bool, string) {
		st := h.Stats()
		g, fd := runtime.NumGoroutine(), openFDs()
		state := fmt.Sprintf("connections=%d channels=%d goroutines=%d (baseline %d) fds=%d (baseline %d)",
			st.Connections, st.Channels, g, baseG, fd, baseFD)
		return st.Connections == 0 && st.Channels == 0 && g <= baseG && fd <= baseFD, state
	})
	t.Logf("after %d connections: %+v", total+slow, h.Stats())
}

// oneLife runs connection i to one of its ends.
func oneLife(addr string, i int) error {
	switch i % 3 {
	case 0: // clean close: close frame both ways
		c, err := connectSubscribed(addr, i)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.WriteFrame(true, 0x8, []byte{0x03, 0xE8}); err != nil {
			return err
		}
		code, err := c.ExpectClose(patience)
		if err != nil || code != 1000 {
			return fmt.Errorf("clean close: code %d, %v", code, err)
		}
		return nil
	case 1: // abrupt reset
		c, err := connectSubscribed(addr, i)
		if err != nil {
			return err
		}
		_ = c.Conn.(*net.TCPConn).SetLinger(0)
		return c.Close()
	default: // dropped in the middle of the handshake
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		_, _ = nc.Write([]byte("GET /app/app-key HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"))
		return nc.Close()
	}
}

func TestServerPingsAndClosesOnPongTimeout(t *testing.T) {
	// The answering client's pong must beat the pong timeout: 5 s is a wide margin for a local
	// reply on a busy machine (and the time the silent client takes to be closed).
	_, addr := startServer(t, session.Config{ActivityTimeout: time.Second, PongTimeout: 5 * time.Second, SweepInterval: 50 * time.Millisecond})
	silent, err := wstest.Dial(addr, "/app/app-key")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	answering, err := wstest.Dial(addr, "/app/app-key")
	if err != nil {
		t.Fatal(err)
	}
	defer answering.Close()
	for _, c := range []*wstest.Client{silent, answering} {
		if _, err := c.Expect("pusher:ping", patience); err != nil {
			t.Fatal(err)
		}
	}
	if err := answering.WriteJSON(map[string]any{"event": "pusher:pong", "data": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	code, err := silent.ExpectClose(patience)
	if err != nil || code != 4201 {
		t.Fatalf("silent client: close %d, %v; want 4201", code, err)
	}
	// The client that answered is pinged again later rather than closed.
	m, err := answering.Read(patience)
	if err != nil || m.Event != "pusher:ping" {
		t.Fatalf("answering client: got %+v, %v; want another pusher:ping", m, err)
	}
}

func TestShutdownClosesWith4200(t *testing.T) {
	h, addr := startServer(t, session.Config{})
	var cs []*wstest.Client
	for i := 0; i < 20; i++ {
		c, err := connectSubscribed(addr, i)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	done := make(chan error, 1)
	go func() { done <- h.Shutdown(t.Context()) }()
	for _, c := range cs {
		m, err := c.Expect("pusher:error", patience)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(m.Data), "4200") {
			t.Fatalf("pusher:error data %s, want code 4200", m.Data)
		}
		code, err := c.ExpectClose(patience)
		if err != nil || code != 4200 {
			t.Fatalf("close %d, %v; want 4200", code, err)
		}
		c.Close()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := h.Stats().Connections; n != 0 {
		t.Fatalf("%d connections counted after shutdown", n)
	}
}
