package session_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// expectRefusal dials and expects a pusher:error and a close frame, both with code.
func expectRefusal(t *testing.T, addr, path string, code int) {
	t.Helper()
	expectCode(t, dialWith(t, addr, path, "", nil), code)
}

func TestRefusals(t *testing.T) {
	quota := &herald.App{ID: "q", Key: "q-key", Secret: "s", Limits: herald.Limits{MaxConnections: 1}.WithDefaults()}
	h, err := session.New(session.Config{MaxConnections: 3}, storeOf(app, quota), local(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeWS(w, r, r.URL.Path[len("/app/"):])
	})}
	go srv.Serve(ln)
	defer srv.Close()
	defer h.Shutdown(t.Context())
	addr := ln.Addr().String()

	expectRefusal(t, addr, "/app/no-such-key", 4001)

	q1, err := wstest.Dial(addr, "/app/q-key")
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Close()
	if _, err := q1.SocketID(patience); err != nil {
		t.Fatal(err)
	}
	expectRefusal(t, addr, "/app/q-key", 4004)

	var held []*wstest.Client
	for i := 0; i < 2; i++ {
		c, err := wstest.Dial(addr, "/app/app-key")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.SocketID(patience); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	expectRefusal(t, addr, "/app/app-key", 4100)
	if st := h.Stats(); st.Connections != 3 || st.Refused != 3 {
		t.Fatalf("stats %+v; want 3 connections and 3 refusals", st)
	}
	// A slot freed is a slot available again.
	held[0].Close()
	poll.Until(t, patience, "slot freed", func() (bool, string) {
		n := h.Stats().Connections
		return n == 2, fmt.Sprint(n, " connections")
	})
	c, err := wstest.Dial(addr, "/app/app-key")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SocketID(patience); err != nil {
		t.Fatalf("after a slot was freed: %v", err)
	}
}
