package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// watchEvent is one entry of a pusher_internal:watchlist_events.
type watchEvent struct {
	Name    string   `json:"name"`
	UserIDs []string `json:"user_ids"`
}

// signinAs connects to addr and signs in with userData, returning the client once it has its
// signin_success.
func signinAs(t *testing.T, addr string, userData map[string]any) *wstest.Client {
	t.Helper()
	c, sid := dial(t, &node{addr: addr})
	ud, _ := json.Marshal(userData)
	if err := c.WriteJSON(map[string]any{"event": "pusher:signin", "data": map[string]string{
		"user_data": string(ud), "auth": app.Key + ":" + pusher.Sign(app.Secret, sid+"::user::"+string(ud))}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher:signin_success", patience); err != nil {
		t.Fatal(err)
	}
	return c
}

// nextWatch reads c until a pusher_internal:watchlist_events and returns its entries.
func nextWatch(t *testing.T, c *wstest.Client) []watchEvent {
	t.Helper()
	m, err := c.Expect("pusher_internal:watchlist_events", patience)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Events []watchEvent }
	if err := json.Unmarshal([]byte(m.DataString()), &d); err != nil {
		t.Fatalf("watchlist_events data %q: %v", m.DataString(), err)
	}
	return d.Events
}

// expectWatch reads the next watchlist event of c and checks it is want.
func expectWatch(t *testing.T, c *wstest.Client, want ...watchEvent) {
	t.Helper()
	got := nextWatch(t, c)
	for i := range got {
		slices.Sort(got[i].UserIDs)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watchlist events %v, want %v", got, want)
	}
}

// TestWatchlist: a user signing in with a watchlist gets its status (online: those signed in
// here, offline: the others); then "online" when a watched user's first connection signs in
// (not its second), "offline" when its last signed-in connection goes (not before); users
// who do not watch get nothing; a watcher that goes stops getting events.
func TestWatchlist(t *testing.T) {
	_, addr := startServer(t, session.Config{})
	bob := signinAs(t, addr, map[string]any{"id": "bob"})
	ann := signinAs(t, addr, map[string]any{"id": "ann", "watchlist": []string{"bob", "cid", "dee", "bob", ""}})
	expectWatch(t, ann, watchEvent{"online", []string{"bob"}}, watchEvent{"offline", []string{"cid", "dee"}})
	eve := signinAs(t, addr, map[string]any{"id": "eve"}) // watches nobody

	cid := signinAs(t, addr, map[string]any{"id": "cid"})
	expectWatch(t, ann, watchEvent{"online", []string{"cid"}})
	cid2 := signinAs(t, addr, map[string]any{"id": "cid"})
	cid.Close()
	bob.Close()
	expectWatch(t, ann, watchEvent{"offline", []string{"bob"}}) // not cid: cid2 is still there
	cid2.Close()
	expectWatch(t, ann, watchEvent{"offline", []string{"cid"}})

	// A second watcher of dee, and ann going: only the second one hears of dee.
	fay := signinAs(t, addr, map[string]any{"id": "fay", "watchlist": []string{"dee"}})
	expectWatch(t, fay, watchEvent{"offline", []string{"dee"}})
	ann.Close()
	signinAs(t, addr, map[string]any{"id": "dee"})
	expectWatch(t, fay, watchEvent{"online", []string{"dee"}})

	// eve got no watchlist event at all: anything sent to her was queued before her ping.
	if err := eve.WriteJSON(map[string]any{"event": "pusher:ping", "data": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := eve.Read(patience)
		if err != nil {
			t.Fatal(err)
		}
		if m.Event == "pusher_internal:watchlist_events" {
			t.Fatalf("a user without a watchlist got %s", m.DataString())
		}
		if m.Event == "pusher:pong" {
			break
		}
	}
}

// TestWatchlistTooLong: a watchlist of more than 100 user ids refuses the sign-in with a
// pusher:error 4009 that says so, and closes the connection with 4009.
func TestWatchlistTooLong(t *testing.T) {
	_, addr := startServer(t, session.Config{})
	c, sid := dial(t, &node{addr: addr})
	ids := make([]string, pusher.MaxWatchlist+1)
	for i := range ids {
		ids[i] = fmt.Sprint("u", i)
	}
	ud, _ := json.Marshal(map[string]any{"id": "big", "watchlist": ids})
	if err := c.WriteJSON(map[string]any{"event": "pusher:signin", "data": map[string]string{
		"user_data": string(ud), "auth": app.Key + ":" + pusher.Sign(app.Secret, sid+"::user::"+string(ud))}}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Expect("pusher:error", patience)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), "watchlist has 101 user ids, at most 100") || !strings.Contains(string(m.Data), "4009") {
		t.Errorf("pusher:error %s", m.Data)
	}
	if code, err := c.ExpectClose(patience); err != nil || code != 4009 {
		t.Errorf("close %d (%v), want 4009", code, err)
	}
}

// TestWatchlistAcrossNodes: in a cluster a user signed in on any node is online: a watcher on
// another node gets it in its sign-in status and its online/offline changes, one of each
// whatever node its connections are on, and "offline" when the node its user was on falls
// silent past the node timeout.
func TestWatchlistAcrossNodes(t *testing.T) {
	bus := memory.NewBus()
	nodes := startClusterOn(t, bus, 3, session.Config{}, fastState, nil)
	signinAs(t, nodes[1].addr, map[string]any{"id": "bob"})
	signinAs(t, nodes[2].addr, map[string]any{"id": "gus"})
	// Signs in on node 0 until its status shows bob and gus online (the state of other nodes
	// reaches node 0 within a heartbeat or so).
	var ann *wstest.Client
	poll.Until(t, patience, "bob and gus online in ann's status", func() (bool, string) {
		if ann != nil {
			ann.Close()
		}
		ann = signinAs(t, nodes[0].addr, map[string]any{"id": "ann", "watchlist": []string{"bob", "cid", "gus"}})
		got := nextWatch(t, ann)
		return fmt.Sprint(got) == fmt.Sprint([]watchEvent{{"online", []string{"bob", "gus"}}, {"offline", []string{"cid"}}}), fmt.Sprint(got)
	})

	cid1 := signinAs(t, nodes[1].addr, map[string]any{"id": "cid"})
	expectWatch(t, ann, watchEvent{"online", []string{"cid"}})
	cid0 := signinAs(t, nodes[0].addr, map[string]any{"id": "cid"}) // online already: no event
	cid1.Close()
	cid0.Close()
	expectWatch(t, ann, watchEvent{"offline", []string{"cid"}}) // once, when neither is left

	start := time.Now()
	_ = nodes[2].b.Close(context.Background()) // node 2, gus's, falls silent
	expectWatch(t, ann, watchEvent{"offline", []string{"gus"}})
	t.Logf("offline %v after node 2 fell silent (timeout %v)", time.Since(start).Round(time.Millisecond), fastState.NodeTimeout)
}
