package bench

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
)

// TestReconnectRecovers: 20 clients, half on a history channel and half on a plain one, get
// two events; then the network drops 10 of them (no close frame), two events are published
// while they are away, and two more once they are back. Every dropped client reconnects as
// pusher-js does; those on the history channel recover the events they missed, so they have
// all six once, in order; those on the plain channel resubscribe without a position and miss
// the two.
func TestReconnectRecovers(t *testing.T) {
	target := startHistory(t, 1000, nil)
	chans := []string{"recover-r", "plain"}
	l, err := subscribeHere(t.Context(), target, subSpec{Conns: 20, Channels: chans, Events: 6, Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	// Half the clients are on each channel: the history channel's learn their position first.
	clients := l.p.clients
	poll.Until(t, patience, "the history channel's clients to know their position", func() (bool, string) {
		n := 0
		for _, c := range clients {
			c.mu.Lock()
			if c.pos != nil && c.pos.known {
				n++
			}
			c.mu.Unlock()
		}
		return n == 10, fmt.Sprintf("%d of 10 positioned", n)
	})
	pub, err := newPublisher(target, 50, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.close()
	publish := func(seqs ...int) {
		t.Helper()
		for _, seq := range seqs {
			if _, err := pub.trigger(t.Context(), chans, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	hits := func(n int64) {
		t.Helper()
		poll.Until(t, patience, fmt.Sprintf("%d first receipts", n), func() (bool, string) {
			h := l.rec.hits.Load()
			return h >= n, fmt.Sprintf("%d", h)
		})
	}
	publish(1, 2)
	hits(40)

	// The network drops five clients of each channel: no close frame, not the generator's
	// doing. pusher-js comes back a second later.
	dropped := [2]int{}
	for _, c := range clients {
		if ch := c.chans[0]; dropped[ch] < 5 {
			dropped[ch]++
			c.mu.Lock()
			c.conn.Shutdown()
			c.mu.Unlock()
		}
	}
	poll.Until(t, patience, "10 clients to hang up", func() (bool, string) {
		r := l.p.re.report()
		return r.Closed == 10, fmt.Sprintf("%+v", r)
	})
	publish(3, 4)
	poll.Until(t, patience, "10 clients to reconnect", func() (bool, string) {
		r := l.p.re.report()
		return r.Reconnected == 10 && r.Recovered == 5, fmt.Sprintf("%+v", r)
	})
	publish(5, 6)
	hits(20*6 - 5*2)

	tl, err := l.finish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := tl.Reconnect
	if r == nil || r.Positioned != 10 || r.Closed != 10 || r.Reconnected != 10 || r.Attempts != 10 || r.Recovered != 5 || r.Plain != 5 || len(r.NotRecovered) != 0 || r.FirstError != "" {
		t.Fatalf("reconnect %+v; want 10 back, the 5 on the history channel recovered, 5 without a position", r)
	}
	if d := tl.Delivery; d.Expected != 120 || d.Delivered != 110 || d.Missing != 10 || d.Duplicated != 0 || d.OutOfOrder != 0 || d.Unexpected != 0 {
		t.Fatalf("delivery %+v; want 110 of 120: the history channel's clients all 6 once and in order, the plain one's 5 dropped clients without events 3 and 4", d)
	}
	if tl.Lost.Count != 10 || tl.Lost.ByCode[0] != 10 {
		t.Fatalf("lost %+v; want the 10 dropped connections, without a close frame", tl.Lost)
	}
	var text strings.Builder
	r.writeText(&text)
	if want := "  reconnected  10 of 10 dropped subscribers (10 dials): 5 recovered, 5 without a position; 10 subscribers knew their position\n"; text.String() != want {
		t.Fatalf("the report says %q; want %q", text.String(), want)
	}
}

// TestReconnectDelay: pusher-js's rules for whether and when to reconnect.
func TestReconnectDelay(t *testing.T) {
	for _, tc := range []struct {
		code  int
		delay string
		ok    bool
	}{
		{4200, "0s", true}, {4201, "0s", true}, {4299, "0s", true},
		{4100, "1s", true}, {4199, "1s", true}, {0, "1s", true}, {1006, "1s", true},
		{4000, "", false}, {4009, "", false}, {1000, "", false}, {4300, "", false},
	} {
		d, ok := reconnectDelay(tc.code)
		if ok != tc.ok || (ok && d.String() != tc.delay) {
			t.Errorf("code %d: reconnect %v after %v; want %v after %s", tc.code, ok, d, tc.ok, tc.delay)
		}
	}
}

// TestReconnectRetriesSetup: the server refuses the first three WebSocket handshakes; with
// Reconnect those clients try again a second later, as pusher-js does, subscribe, and get
// every event: the run waits for them before it publishes and expects them, and a report of
// it is clean.
func TestReconnectRetriesSetup(t *testing.T) {
	var refused atomic.Int32
	target := startHistory(t, 1000, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/app/") && refused.Add(1) <= 3 {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	target.Concurrency = 1 // the first three attempts are the refused ones
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 10, Events: 2, Interval: time.Millisecond, Channel: "recover-s",
		Reconnect: true, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Reconnect
	if rep.Setup.Established != 7 || rep.Setup.Failed != 3 || r == nil || r.SetupRetried != 3 || r.SetupLater != 3 || r.Closed != 0 || r.Positioned != 10 {
		t.Fatalf("setup %+v, reconnect %+v; want 7 at first, the 3 refused subscribed a second later, all 10 positioned", rep.Setup, r)
	}
	if d := rep.Delivery; d.Expected != 20 || d.Delivered != 20 || !rep.Clean() {
		t.Fatalf("delivery %+v, clean %v; want all 20, clean", d, rep.Clean())
	}
	checkText(t, rep, "3 failed first connections tried again, 3 of them subscribed")
	rep.Reconnect.SetupLater = 2
	if rep.Clean() {
		t.Fatal("a report with a first connection that never subscribed is clean")
	}
}
