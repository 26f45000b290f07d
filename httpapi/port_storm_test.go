package httpapi_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// gatedListener serves a Port's connections whose reads wait until gate is closed: the
// server's goroutines have not run yet, as on a starved machine, while the clients' bytes
// wait in the kernel.
type gatedListener struct {
	*httpapi.Port
	gate chan struct{}
}

func (l *gatedListener) Accept() (net.Conn, error) {
	c, err := l.Port.Accept()
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, gate: l.gate}, nil
}

type gatedConn struct {
	net.Conn
	gate chan struct{}
}

func (c *gatedConn) Read(b []byte) (int, error) {
	<-c.gate
	return c.Conn.Read(b)
}

// NetConn lets the port find its connection under the wrapper, as under a TLS one.
func (c *gatedConn) NetConn() net.Conn { return c.Conn }

// TestPortSparesUnreadRequests: when the port is full, a connection that has been reading for
// EvictAfter but whose request waits unread in the kernel (the server has not read it: its
// goroutine has not run) is not evicted as a slow request; the newcomer waits, and every
// request is served once the server reads. A connection with nothing unread (a client that
// sent nothing) is still evicted for room: the slow-loris defence holds.
func TestPortSparesUnreadRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	port := httpapi.NewPort(ln, httpapi.PortConfig{MaxConns: 2, EvictAfter: 50 * time.Millisecond, RequestTimeout: time.Minute}, nil)
	srv := port.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok "+r.URL.Path) }))
	gate := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(&gatedListener{Port: port, gate: gate})
	}()
	defer func() {
		srv.Close()
		<-done
	}()
	request := func(path string) net.Conn {
		t.Helper()
		c := rawRequest(t, addr, "GET "+path+" HTTP/1.1\r\nConnection: close", "")
		return c
	}
	a, b := request("/a"), request("/b")
	poll.NoError(t, wait, "the port to hold the two unread requests", func() error {
		if st := port.Stats(); st.Open != 2 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	c := request("/c")
	poll.NoError(t, wait, "the two unread requests to be spared", func() error {
		if st := port.Stats(); st.Spared != 2 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // several EvictAfters: they must stay
	expectOpen(t, a, "an unread request past EvictAfter")
	expectOpen(t, b, "an unread request past EvictAfter")
	if st := port.Stats(); st.EvictedBusy != 0 || st.Open != 2 {
		t.Fatalf("stats %+v: want the two unread requests held, none evicted", st)
	}
	close(gate)
	for i, cn := range []net.Conn{a, b, c} {
		want := "ok /" + string(rune('a'+i))
		if resp, body := readAnswer(t, cn, wait); resp.StatusCode != 200 || body != want {
			t.Fatalf("request %d: %d %q, want %q", i, resp.StatusCode, body, want)
		}
	}
	if st := port.Stats(); st.EvictedBusy != 0 || st.Refused != 0 || st.Spared != 2 {
		t.Fatalf("stats %+v: want no eviction, no refusal, two spared", st)
	}

	// The server reads now: a client that connects and sends nothing is slow, and is
	// evicted for a newcomer once it has waited EvictAfter.
	poll.NoError(t, wait, "the port to be empty", func() error {
		if st := port.Stats(); st.Open != 0 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	silent := func() net.Conn {
		t.Helper()
		s, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1 := silent()
	poll.NoError(t, wait, "the first silent connection to be admitted", func() error {
		if st := port.Stats(); st.Open != 1 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	s2 := silent()
	poll.NoError(t, wait, "the second silent connection to be admitted", func() error {
		if st := port.Stats(); st.Open != 2 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	d := request("/d")
	if resp, body := readAnswer(t, d, wait); resp.StatusCode != 200 || body != "ok /d" {
		t.Fatalf("the newcomer: %d %q", resp.StatusCode, body)
	}
	expectClosed(t, s1, "the oldest silent connection", wait)
	expectOpen(t, s2, "the younger silent connection")
	if st := port.Stats(); st.EvictedBusy != 1 || st.Spared != 2 {
		t.Fatalf("stats %+v: want the silent connection evicted, and no more spared", st)
	}
}

// TestPortBorrowsSpare: a port lent room by Spare admits connections beyond MaxConns without
// evicting anyone, counts them as borrowed, and is full again, evicting the slowest for room,
// when the lent room is taken back.
func TestPortBorrowsSpare(t *testing.T) {
	var spare atomic.Int64
	spare.Store(3)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	port, addr := serveOn(t, httpapi.PortConfig{MaxConns: 2, EvictAfter: 50 * time.Millisecond, RequestTimeout: time.Minute,
		Spare: func() int { return int(spare.Load()) }}, h)
	var silent []net.Conn
	for i := range 5 {
		s, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		silent = append(silent, s)
		poll.NoError(t, wait, fmt.Sprintf("silent connection %d to be admitted", i), func() error {
			if st := port.Stats(); st.Open != i+1 {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
	}
	time.Sleep(200 * time.Millisecond) // past EvictAfter: nobody needs their room yet
	for i, s := range silent {
		expectOpen(t, s, fmt.Sprintf("silent connection %d on lent room", i))
	}
	if st := port.Stats(); st.Borrowed != 3 || st.EvictedBusy != 0 || st.Limit != 5 {
		t.Fatalf("stats %+v: want three borrowed, none evicted, limit 5", st)
	}
	spare.Store(0) // taken back: the port holds 5 of 2
	c := rawRequest(t, addr, "GET / HTTP/1.1\r\nConnection: close", "")
	if resp, body := readAnswer(t, c, wait); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("the newcomer: %d %q", resp.StatusCode, body)
	}
	expectClosed(t, silent[0], "the oldest silent connection", wait)
	if st := port.Stats(); st.EvictedBusy < 4 || st.Borrowed != 3 {
		t.Fatalf("stats %+v: want the silent connections evicted down to the cap", st)
	}
}

// TestPortReconnectStorm: thousands of WebSocket clients come back at once (a node's clients
// after another node died) to a port of the default size lent the node's free WebSocket
// capacity, as cmd/herald lends it, on a machine the storm itself keeps busy: every one is
// upgraded, none is evicted, refused or timed out.
func TestPortReconnectStorm(t *testing.T) {
	clients := 3000
	if testing.Short() {
		clients = 1000
	}
	var node atomic.Pointer[session.Server]
	const maxConns = 256
	capacity := 2 * clients // a node with room: the storm takes half its WebSocket capacity
	pc := httpapi.PortConfig{Name: "api", MaxConns: maxConns, Spare: func() int {
		h := node.Load()
		if h == nil {
			return 0
		}
		return max(capacity-int(h.Connections()), 0)
	}}
	e := newPortEnv(t, pc, httpapi.Config{}, capacity)
	node.Store(e.node)

	began := time.Now()
	conns, failed, firstErr := wstest.Storm(e.addr, "/app/key-one?protocol=7", clients)
	took := time.Since(began)
	defer func() {
		for _, cl := range conns {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	st := e.port.Stats()
	t.Logf("%d clients upgraded in %v; port %+v", clients-failed, took.Round(time.Millisecond), st)
	if failed > 0 {
		t.Fatalf("%d of %d clients failed, first: %v", failed, clients, firstErr)
	}
	if st.EvictedBusy != 0 || st.EvictedIdle != 0 || st.Refused != 0 || st.TimedOut != 0 {
		t.Fatalf("port %+v: want no eviction, refusal or timeout", st)
	}
	if n := e.node.Connections(); n != int64(clients) {
		t.Fatalf("the node holds %d connections, want %d", n, clients)
	}
}
