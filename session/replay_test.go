package session_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// bigHistoryApp keeps the last 10,000 events of auction-* channels.
var bigHistoryApp = &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret", Limits: herald.DefaultLimits,
	History: []herald.HistoryRule{{Channels: "auction-*", Size: 10000, TTL: time.Hour}}}

// kib is an event's data of about 1 KiB, numbered i.
func kib(i int) string { return strconv.Itoa(i) + ":" + strings.Repeat("x", 1000) }

// TestRecoverTenMiB: a client that missed 10,000 events of 1 KiB (10 MiB, ten times the
// default outbound bound of 1 MiB) recovers all of them, once, in order, then
// recovered:true, and the events published during the replay follow it, none lost; it is
// never closed as a slow consumer.
func TestRecoverTenMiB(t *testing.T) {
	h, addr := startServerApps(t, session.Config{}, bigHistoryApp)
	c := dialApp(t, addr)
	_, _, first := subscribeRecover(t, c, "auction-big", nil)
	c.Close()
	const missed, live = 10000, 200
	for i := 1; i <= missed; i++ {
		if err := h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-big", Data: kib(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c = dialApp(t, addr)
	if err := c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": map[string]any{"channel": "auction-big",
		"recover": map[string]any{"epoch": first.Epoch, "offset": 0}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // live events during the replay
		defer wg.Done()
		for i := missed + 1; i <= missed+live; i++ {
			if err := h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-big", Data: kib(i)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var pos position
	next, recovered := 1, false
	for next <= missed+live {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatalf("after event %d: %v", next-1, err)
		}
		switch m.Event {
		case "pusher_internal:position":
			pos = decodePosition(t, m)
		case "pusher_internal:recovery":
			rec := decodePosition(t, m)
			if recovered || rec.Recovered == nil || !*rec.Recovered || int(rec.Offset) != next-1 || next-1 < missed {
				t.Fatalf("recovery frame %+v after event %d; want one, recovered, at the last replayed event (at least %d)", rec, next-1, missed)
			}
			recovered = true
		case "bid":
			if d := m.DataString(); d != kib(next) || int(pos.Offset) != next {
				t.Fatalf("event %d: got %.20q at offset %d", next, d, pos.Offset)
			}
			next++
		default:
			if m.Close != 0 {
				t.Fatalf("closed with %d after event %d", m.Close, next-1)
			}
		}
	}
	wg.Wait()
	if !recovered {
		t.Fatal("no recovery frame")
	}
	if out := h.Recoveries(); out[0] != 1 {
		t.Fatalf("recoveries by outcome %v; want one recovered", out)
	}
	var replayed, pages int64
	for _, m := range h.AppMetrics() {
		replayed, pages = replayed+m.ReplayedBytes, pages+m.ReplayPages
	}
	if replayed < missed*1000 || pages < 10 {
		t.Fatalf("counted %d bytes replayed in %d pages; want at least %d bytes in pages under the bound", replayed, pages, missed*1000)
	}
}

// dialFrom opens a connection to the app from local address ip (another client address on
// loopback).
func dialFrom(t *testing.T, addr, ip string) *wstest.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: wstest.HandshakeTimeout}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := wstest.Handshake(nc, addr, "/app/app-key")
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.SocketID(patience); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReplayBudget: a recovery is let through whole while its connection's and its address's
// budgets have bytes left, and then charged to them; while one is in debt, a recovery is
// answered recovered:false with reason rate_limited, nothing replayed, and the live events go
// on. Another address has its own budget. Each refusal is counted by level.
func TestReplayBudget(t *testing.T) {
	slow := guard.Rate{PerSecond: 1, Burst: 1} // repaid in hours: whatever is spent stays spent
	for _, tc := range []struct {
		level  string
		budget session.ReplayBudget
		// second dials the second recovering client: the same connection or address.
		second func(t *testing.T, addr string, first *wstest.Client) *wstest.Client
	}{
		{"connection", session.ReplayBudget{Connection: slow},
			func(t *testing.T, addr string, first *wstest.Client) *wstest.Client { return first }},
		{"address", session.ReplayBudget{Address: slow},
			func(t *testing.T, addr string, _ *wstest.Client) *wstest.Client {
				return dialFrom(t, addr, "127.0.0.1")
			}},
		{"app", session.ReplayBudget{App: slow},
			func(t *testing.T, addr string, _ *wstest.Client) *wstest.Client {
				return dialFrom(t, addr, "127.0.0.3")
			}},
		{"node", session.ReplayBudget{Node: slow},
			func(t *testing.T, addr string, _ *wstest.Client) *wstest.Client {
				return dialFrom(t, addr, "127.0.0.4")
			}},
	} {
		t.Run(tc.level, func(t *testing.T) {
			h, addr := startServerApps(t, session.Config{ReplayBudget: tc.budget}, historyApp)
			publishN(t, h, "auction-1", 1, 3)
			c := dialFrom(t, addr, "127.0.0.1")
			from := &herald.Position{Epoch: "", Offset: 0}
			events, _, rec := subscribeRecover(t, c, "auction-1", from)
			if strings.Join(events, ",") != "1,2,3" || !*rec.Recovered {
				t.Fatalf("first recovery: replayed %v, %+v; want 1,2,3 recovered", events, rec)
			}
			c2 := tc.second(t, addr, c)
			if c2 == c {
				if err := c.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]any{"channel": "auction-1"}}); err != nil {
					t.Fatal(err)
				}
			}
			events, _, rec = subscribeRecover(t, c2, "auction-1", from)
			if len(events) != 0 || rec.Recovered == nil || *rec.Recovered || rec.Reason != session.ReasonRateLimited || rec.Offset != 3 {
				t.Fatalf("second recovery over the %s budget: replayed %v, %+v; want nothing, rate_limited at 3", tc.level, events, rec)
			}
			publishN(t, h, "auction-1", 4, 4)
			if got := readHistory(t, c2, 1, 4); got[0] != "4" {
				t.Fatalf("live event after the refused recovery: %v", got)
			}
			refused := h.ReplayRefusals()
			for i, l := range session.ReplayBudgetLevels {
				if want := int64(map[bool]int{true: 1}[l == tc.level]); refused[i] != want {
					t.Fatalf("refusals by level %v; want one, by %s", refused, tc.level)
				}
			}
			if tc.level == "address" {
				// Another address still has its budget.
				c3 := dialFrom(t, addr, "127.0.0.2")
				if events, _, rec := subscribeRecover(t, c3, "auction-1", from); len(events) != 4 || !*rec.Recovered {
					t.Fatalf("a recovery from another address: replayed %v, %+v; want 4 events recovered", events, rec)
				}
			}
		})
	}
}

// TestNothingAfterClose: what a client sends after its close frame is not acted on: the
// subscriptions with recovery it queued behind the close replay nothing.
func TestNothingAfterClose(t *testing.T) {
	h, addr := startServerApps(t, session.Config{}, historyApp)
	publishN(t, h, "auction-1", 1, 5)
	c := dialApp(t, addr)
	var batch []byte
	frame := func(op byte, payload string) []byte { // one masked frame with a zero mask
		b := []byte{0x80 | op, 0x80 | byte(len(payload)), 0, 0, 0, 0}
		return append(b, payload...)
	}
	batch = append(batch, frame(0x8, "\x03\xe8")...)
	for i := range 20 {
		batch = append(batch, frame(0x1, fmt.Sprintf(`{"event":"pusher:subscribe","data":{"channel":"auction-%d","recover":{"epoch":"","offset":0}}}`, i))...)
	}
	if _, err := c.Conn.Write(batch); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExpectClose(patience); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "the connection gone", func() (bool, string) {
		n := int64(0)
		for _, m := range h.AppMetrics() {
			n += m.Connections
		}
		return n == 0, strconv.FormatInt(n, 10)
	})
	for i, n := range h.Recoveries() {
		if n != 0 {
			t.Fatalf("recoveries %v after the close (%s): want none", h.Recoveries(), session.RecoveryReasons[i])
		}
	}
}
