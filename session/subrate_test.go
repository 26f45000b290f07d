package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// TestSubscribeRate: a client that joins and leaves a presence channel in a loop, reusing one
// auth string, is held to max_subscriptions_per_second: the subscriptions over it are refused
// with a pusher:subscription_error of status 4301, the connection stays open, and the other
// members get member_added and member_removed only for the joins accepted.
func TestSubscribeRate(t *testing.T) {
	app := &herald.App{ID: "s", Key: "s-key", Secret: "s-secret",
		Limits: herald.Limits{MaxSubscriptionsPerSecond: 5, MaxChannelsPerConn: 5}.WithDefaults()}
	h, addr := startServerApps(t, session.Config{}, app)
	const ch = "presence-room"
	join := func(user string) (*wstest.Client, string) {
		c := dialWith(t, addr, "/app/s-key", "", nil)
		sid := expectConnected(t, c)
		data := `{"user_id":"` + user + `"}`
		auth := app.Key + ":" + pusher.Sign(app.Secret, sid+":"+ch+":"+data)
		if err := c.Subscribe(ch, auth, data); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			t.Fatal(err)
		}
		return c, auth
	}
	watcher, _ := join("watcher")
	abuser, auth := join("abuser")
	if _, err := watcher.Expect("pusher_internal:member_added", patience); err != nil {
		t.Fatal(err)
	}
	const pairs = 200
	start := time.Now()
	for i := 0; i < pairs; i++ {
		if err := abuser.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]any{"channel": ch}}); err != nil {
			t.Fatal(err)
		}
		if err := abuser.WriteJSON(map[string]any{"event": "pusher:subscribe",
			"data": map[string]any{"channel": ch, "auth": auth, "channel_data": `{"user_id":"abuser"}`}}); err != nil {
			t.Fatal(err)
		}
	}
	// Then a ping: its pong proves every message before it was handled and the abuser is open.
	if err := abuser.WriteJSON(map[string]any{"event": "pusher:ping", "data": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	accepted, refused := 0, 0
	for {
		m, err := abuser.Read(patience)
		if err != nil {
			t.Fatalf("after %d accepted and %d refused: %v", accepted, refused, err)
		}
		switch {
		case m.Event == "pusher:pong":
		case m.Event == "pusher_internal:subscription_succeeded":
			accepted++
			continue
		case m.Event == "pusher:subscription_error" && strings.Contains(m.DataString(), `"status":4301`):
			refused++
			continue
		default:
			t.Fatalf("the abuser got %s %s", m.Event, m.Data)
		}
		break
	}
	elapsed := time.Since(start)
	// The watcher gets a member_removed and a member_added per accepted join, then a marker.
	if err := h.Publish("s", herald.Event{Name: "marker", Channel: ch, Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	events := 0
	for {
		m, err := watcher.Read(patience)
		if err != nil {
			t.Fatal(err)
		}
		if m.Event == "marker" {
			break
		}
		if m.Event != "pusher_internal:member_added" && m.Event != "pusher_internal:member_removed" {
			t.Fatalf("the watcher got %s %s", m.Event, m.Data)
		}
		events++
	}
	// The first join above took one token of the burst of 5; the bucket refills at 5/s for as
	// long as the loop took to handle, however slow the machine.
	most := 4 + int(elapsed.Seconds()*5) + 1
	if accepted+refused != pairs || accepted > most || refused == 0 && most < pairs {
		t.Fatalf("accepted %d, refused %d of %d joins in %v; want at most %d accepted, the rest refused", accepted, refused, pairs, elapsed, most)
	}
	// Each accepted join follows a leave: both reach the watcher, and so does the leave of the
	// abuser's first join (the loop ends with a join).
	if events < 2*accepted || events > 2*accepted+1 {
		t.Fatalf("the watcher got %d member events for %d accepted joins", events, accepted)
	}
	var limited int64
	for _, m := range h.AppMetrics() {
		limited += m.SubscribesLimited
	}
	if limited != int64(refused) {
		t.Fatalf("SubscribesLimited = %d, want %d", limited, refused)
	}
}
