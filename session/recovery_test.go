package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// historyApp keeps the last 5 events of auction-* channels for a minute.
var historyApp = &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret", Limits: herald.DefaultLimits,
	History: []herald.HistoryRule{{Channels: "auction-*", Size: 5, TTL: time.Minute}}}

// position is the data of pusher_internal:position and pusher_internal:recovery.
type position struct {
	Epoch     string `json:"epoch"`
	Offset    uint64 `json:"offset"`
	Recovered *bool  `json:"recovered"`
	Reason    string `json:"reason"`
}

func decodePosition(t *testing.T, m wstest.Message) position {
	t.Helper()
	var p position
	if err := json.Unmarshal([]byte(m.DataString()), &p); err != nil {
		t.Fatalf("%s data %s: %v", m.Event, m.Data, err)
	}
	return p
}

// subscribeRecover subscribes c to channel, asking to recover from p when not nil, and
// returns what it got after pusher_internal:subscription_succeeded: the events (with their
// positions) and the recovery frame.
func subscribeRecover(t *testing.T, c *wstest.Client, channel string, p *herald.Position) (events []string, positions []position, rec position) {
	t.Helper()
	d := map[string]any{"channel": channel}
	if p != nil {
		d["recover"] = map[string]any{"epoch": p.Epoch, "offset": p.Offset}
	}
	if err := c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": d}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatal(err)
		}
		if m.Event == "pusher:subscription_error" || m.Close != 0 {
			t.Fatalf("subscribing to %s: %s %s (close %d)", channel, m.Event, m.DataString(), m.Close)
		}
		if m.Event == "pusher_internal:subscription_succeeded" {
			break
		}
	}
	for {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatal(err)
		}
		switch m.Event {
		case "pusher_internal:position":
			positions = append(positions, decodePosition(t, m))
		case "pusher_internal:recovery":
			return events, positions, decodePosition(t, m)
		default:
			events = append(events, m.DataString())
		}
	}
}

func publishN(t *testing.T, h *session.Server, channel string, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := h.Publish("app-id", herald.Event{Name: "bid", Channel: channel, Data: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecoverOneNode: a subscriber that left after event 2 and comes back asking to recover
// from its position gets events 3 and 4, in order, each after its position frame, then
// recovered:true and the position live events go on from; the next live event follows.
func TestRecoverOneNode(t *testing.T) {
	h, addr := startServerApps(t, session.Config{}, historyApp)
	c := dialApp(t, addr)
	_, _, rec := subscribeRecover(t, c, "auction-1", nil)
	if rec.Recovered != nil || rec.Offset != 0 {
		t.Fatalf("first subscription: recovery frame %+v, want offset 0 and no recovered", rec)
	}
	publishN(t, h, "auction-1", 1, 2)
	var last position
	for i := 1; i <= 2; i++ {
		m, err := c.Expect("pusher_internal:position", patience)
		if err != nil {
			t.Fatal(err)
		}
		last = decodePosition(t, m)
		if ev, err := c.Read(patience); err != nil || ev.Event != "bid" || ev.DataString() != fmt.Sprint(i) {
			t.Fatalf("event %d: got %+v, %v", i, ev, err)
		}
	}
	if last.Offset != 2 || last.Epoch == "" {
		t.Fatalf("position of the second event: %+v", last)
	}
	c.Close()
	publishN(t, h, "auction-1", 3, 4)

	c = dialApp(t, addr)
	events, positions, rec := subscribeRecover(t, c, "auction-1", &herald.Position{Epoch: last.Epoch, Offset: 2})
	if strings.Join(events, ",") != "3,4" || len(positions) != 2 || positions[0].Offset != 3 || positions[1].Offset != 4 {
		t.Fatalf("replayed %v with positions %+v, want 3,4 at offsets 3,4", events, positions)
	}
	if rec.Recovered == nil || !*rec.Recovered || rec.Offset != 4 || rec.Epoch != last.Epoch {
		t.Fatalf("recovery frame %+v, want recovered at offset 4 of %s", rec, last.Epoch)
	}
	publishN(t, h, "auction-1", 5, 5)
	if m, err := c.Expect("bid", patience); err != nil || m.DataString() != "5" {
		t.Fatalf("live event after recovery: %+v, %v", m, err)
	}
}

// TestRecoverFails: a position older than the history keeps, from another epoch, past the
// last offset, or on a channel without history gets recovered:false with its reason and
// nothing replayed; a malformed request is refused with InvalidRecovery and the connection
// goes on.
func TestRecoverFails(t *testing.T) {
	h, addr := startServerApps(t, session.Config{}, historyApp)
	publishN(t, h, "auction-2", 1, 8) // size 5: 1-3 are gone
	c := dialApp(t, addr)
	_, _, now := subscribeRecover(t, c, "auction-2", nil)
	c.Close()
	for _, tc := range []struct {
		channel string
		p       herald.Position
		reason  string
	}{
		{"auction-2", herald.Position{Epoch: now.Epoch, Offset: 1}, "too_old"},
		{"auction-2", herald.Position{Epoch: "other", Offset: 7}, "epoch_changed"},
		{"auction-2", herald.Position{Epoch: now.Epoch, Offset: 9}, "ahead"},
		{"news", herald.Position{Epoch: now.Epoch, Offset: 1}, "no_history"},
	} {
		c := dialApp(t, addr)
		events, _, rec := subscribeRecover(t, c, tc.channel, &tc.p)
		if len(events) != 0 || rec.Recovered == nil || *rec.Recovered || rec.Reason != tc.reason {
			t.Errorf("%s from %+v: replayed %v, recovery %+v; want none and reason %s", tc.channel, tc.p, events, rec, tc.reason)
		}
		c.Close()
	}
	// From offset 3 (the oldest kept is 4): recovered.
	c = dialApp(t, addr)
	if events, _, rec := subscribeRecover(t, c, "auction-2", &herald.Position{Epoch: now.Epoch, Offset: 3}); strings.Join(events, ",") != "4,5,6,7,8" || !*rec.Recovered {
		t.Fatalf("from 3: replayed %v, %+v", events, rec)
	}
	for _, bad := range []string{`"x"`, `{"epoch":1,"offset":1}`, `{"epoch":"e","offset":-1}`, `{"epoch":"e","offset":1.5}`,
		`{"epoch":"e","offset":9007199254740993}`, `{"epoch":"e"}`, `{"epoch":"` + strings.Repeat("e", 65) + `","offset":1}`} {
		if err := c.WriteText(`{"event":"pusher:subscribe","data":{"channel":"auction-3","recover":` + bad + `}}`); err != nil {
			t.Fatal(err)
		}
		m, err := c.Expect("pusher:subscription_error", patience)
		if err != nil || !strings.Contains(m.DataString(), "InvalidRecovery") {
			t.Fatalf("recover %s: %+v, %v", bad, m, err)
		}
	}
	// Still usable.
	if _, _, rec := subscribeRecover(t, c, "auction-3", nil); rec.Recovered != nil {
		t.Fatalf("subscription after refusals: %+v", rec)
	}
	page, err := h.History(context.Background(), "app-id", "auction-2", 5, 2)
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Offset != 6 || page.Latest.Offset != 8 {
		t.Fatalf("History after 5, limit 2: %+v, %v", page, err)
	}
}

func dialApp(t *testing.T, addr string) *wstest.Client {
	t.Helper()
	return dialFrom(t, addr, "127.0.0.1")
}

// TestRecoverEncryptedChannel: an end-to-end encrypted channel keeps no history even under a
// rule that names it: no position on its events, and a recovery answers no_history.
func TestRecoverEncryptedChannel(t *testing.T) {
	all := *historyApp
	all.History = []herald.HistoryRule{{Channels: "*", Size: 5, TTL: time.Minute}}
	h, addr := startServerApps(t, session.Config{}, &all)
	c, err := wstest.Dial(addr, "/app/app-key")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sid, err := c.SocketID(patience)
	if err != nil {
		t.Fatal(err)
	}
	name := "private-encrypted-x"
	auth := all.Key + ":" + pusher.Sign(all.Secret, sid+":"+name)
	if err := c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": map[string]any{"channel": name, "auth": auth,
		"recover": map[string]any{"epoch": "e", "offset": 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	m, err := c.Read(patience)
	if err != nil || m.Event != "pusher_internal:recovery" || !strings.Contains(m.DataString(), "no_history") {
		t.Fatalf("after the subscription: %+v, %v; want recovery no_history", m, err)
	}
	if err := h.Publish("app-id", herald.Event{Name: "e", Channel: name, Data: "cipher"}); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Read(patience); err != nil || m.Event != "e" {
		t.Fatalf("event: %+v, %v; want it without a position before it", m, err)
	}
	if _, err := h.History(context.Background(), "app-id", name, 0, 10); herald.CodeOf(err) != herald.CodeNotFound {
		t.Fatalf("History of an encrypted channel: %v, want not found", err)
	}
}
