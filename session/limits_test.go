package session_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// dialWith opens a WebSocket from local source address src (empty: any) with extra headers.
func dialWith(t *testing.T, addr, path, src string, header map[string]string) *wstest.Client {
	t.Helper()
	d := net.Dialer{Timeout: patience}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := wstest.HandshakeWith(nc, addr, path, header)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectCode reads a pusher:error and a close frame, both with code.
func expectCode(t *testing.T, c *wstest.Client, code int) {
	t.Helper()
	m, err := c.Expect("pusher:error", patience)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Code int }
	if err := json.Unmarshal(m.Data, &d); err != nil || d.Code != code {
		t.Fatalf("pusher:error data %s; want code %d", m.Data, code)
	}
	if got, err := c.ExpectClose(patience); err != nil || got != code {
		t.Fatalf("close code %d, %v; want %d", got, err, code)
	}
}

func expectConnected(t *testing.T, c *wstest.Client) string {
	t.Helper()
	sid, err := c.SocketID(patience)
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

func TestOriginAllowList(t *testing.T) {
	strict := &herald.App{ID: "o", Key: "o-key", Secret: "s", AllowedOrigins: []string{"https://good.example", "*.trusted.example"},
		Limits: herald.DefaultLimits}
	h, addr := startServerApps(t, session.Config{}, strict, app)

	expectCode(t, dialWith(t, addr, "/app/o-key", "", map[string]string{"Origin": "https://evil.example"}), 4009)
	expectConnected(t, dialWith(t, addr, "/app/o-key", "", map[string]string{"Origin": "https://good.example"}))
	expectConnected(t, dialWith(t, addr, "/app/o-key", "", map[string]string{"Origin": "https://a.trusted.example"}))
	expectConnected(t, dialWith(t, addr, "/app/o-key", "", nil)) // no Origin: not a browser
	// Another app without a list takes any origin.
	expectConnected(t, dialWith(t, addr, "/app/app-key", "", map[string]string{"Origin": "https://evil.example"}))

	if got := h.Refusals()[session.RefusedOrigin]; got != 1 {
		t.Fatalf("origin refusals = %d, want 1", got)
	}
	if st := h.Stats(); st.Connections != 4 || st.Refused != 1 {
		t.Fatalf("stats %+v; want 4 connections, 1 refusal", st)
	}
}

func TestPerIPConnectionRate(t *testing.T) {
	// One token in 1,000 s: however slow the machine, none is refilled during the test.
	h, addr := startServer(t, session.Config{IPRate: guard.NewIPRate(guard.Rate{PerSecond: 0.001, Burst: 3}, 0)})
	for i := 0; i < 3; i++ {
		expectConnected(t, dialWith(t, addr, "/app/app-key", "127.0.0.5", nil))
	}
	expectCode(t, dialWith(t, addr, "/app/app-key", "127.0.0.5", nil), 4100)
	expectCode(t, dialWith(t, addr, "/app/app-key", "127.0.0.5", nil), 4100)
	// Another address is not affected, and neither are the connections already open.
	other := dialWith(t, addr, "/app/app-key", "127.0.0.6", nil)
	expectConnected(t, other)
	if err := other.WriteJSON(map[string]any{"event": "pusher:ping", "data": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Expect("pusher:pong", patience); err != nil {
		t.Fatal(err)
	}
	if got := h.Refusals()[session.RefusedIPRate]; got != 2 {
		t.Fatalf("ip_rate refusals = %d, want 2", got)
	}
	if st := h.Stats(); st.Connections != 4 {
		t.Fatalf("%d connections, want 4", st.Connections)
	}
}

func TestMemoryGuardRefusesWithHysteresis(t *testing.T) {
	mem, err := guard.NewMemory(guard.MemoryConfig{Limit: 1000, RefuseAbove: 0.9, AcceptBelow: 0.8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, addr := startServer(t, session.Config{Memory: mem})
	held := dialWith(t, addr, "/app/app-key", "", nil)
	expectConnected(t, held)
	if err := held.Subscribe("news", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}

	mem.Observe(950)
	if !h.Stats().Refusing {
		t.Fatal("Stats().Refusing is false above the threshold")
	}
	expectCode(t, dialWith(t, addr, "/app/app-key", "", nil), 4100)
	mem.Observe(850) // between the thresholds: still refusing
	expectCode(t, dialWith(t, addr, "/app/app-key", "", nil), 4100)

	// The connection made before keeps working.
	if err := h.Publish("app-id", herald.Event{Name: "e", Channel: "news", Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Expect("e", patience); err != nil {
		t.Fatal(err)
	}

	mem.Observe(700)
	expectConnected(t, dialWith(t, addr, "/app/app-key", "", nil))
	if h.Stats().Refusing {
		t.Fatal("still refusing below the accept threshold")
	}
	if got := h.Refusals()[session.RefusedMemory]; got != 2 {
		t.Fatalf("memory refusals = %d, want 2", got)
	}
}

func TestClientEventRate(t *testing.T) {
	limited := &herald.App{ID: "r", Key: "r-key", Secret: "r-secret", EnableClientMessages: true,
		Limits: herald.Limits{MaxClientEventsPerSecond: 5}.WithDefaults()}
	h, addr := startServerApps(t, session.Config{}, limited)
	const ch = "private-room"
	join := func() *wstest.Client {
		c := dialWith(t, addr, "/app/r-key", "", nil)
		sid := expectConnected(t, c)
		if err := c.Subscribe(ch, limited.Key+":"+pusher.Sign(limited.Secret, sid+":"+ch), ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			t.Fatal(err)
		}
		return c
	}
	sender, receiver := join(), join()

	const sent = 20
	start := time.Now()
	for i := 0; i < sent; i++ {
		if err := sender.WriteJSON(map[string]any{"event": "client-move", "channel": ch, "data": map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	// Then a ping: its pong proves every event before it was handled and the sender is open.
	if err := sender.WriteJSON(map[string]any{"event": "pusher:ping", "data": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for {
		m, err := sender.Read(patience)
		if err != nil {
			t.Fatalf("after %d rejections: %v", rejected, err)
		}
		if m.Event == "pusher:pong" {
			break
		}
		if m.Event != "pusher:error" || !strings.Contains(string(m.Data), "4301") {
			t.Fatalf("sender got %s %s", m.Event, m.Data)
		}
		rejected++
	}
	// The server handled every event between start and the pong: the bucket refilled for at
	// most that long, however slow the machine made it.
	elapsed := time.Since(start)
	// The receiver gets exactly the accepted ones, in order: count them up to a marker.
	if err := h.Publish("r", herald.Event{Name: "marker", Channel: ch, Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	got, last := 0, -1
	for {
		m, err := receiver.Read(patience)
		if err != nil {
			t.Fatal(err)
		}
		if m.Event == "marker" {
			break
		}
		var d struct{ I int }
		_ = json.Unmarshal([]byte(m.DataString()), &d)
		if m.Event != "client-move" || d.I <= last {
			t.Fatalf("receiver got %s %s after i=%d", m.Event, m.Data, last)
		}
		last = d.I
		got++
	}
	// Burst 5, refilled at 5/s while the events were handled. Some are
	// rejected unless the machine was so slow that the refill covered them all.
	most := 5 + int(elapsed.Seconds()*5) + 1
	if got+rejected != sent || got < 5 || got > most || rejected == 0 && most < sent {
		t.Fatalf("accepted %d, rejected %d of %d in %v; want 5..%d accepted and the rest rejected", got, rejected, sent, elapsed, most)
	}
	var limitedCount int64
	for _, m := range h.AppMetrics() {
		limitedCount += m.ClientEventsLimited
	}
	if limitedCount != int64(rejected) {
		t.Fatalf("ClientEventsLimited = %d, want %d", limitedCount, rejected)
	}
}

type countObserver struct{ n, bad atomic.Int64 }

// Observe counts a publish latency, in seconds; one that is negative or over a minute (a unit
// mistake, not a slow machine) is bad.
func (o *countObserver) Observe(v float64) {
	o.n.Add(1)
	if v < 0 || v > 60 {
		o.bad.Add(1)
	}
}

func TestAppMetricsAreExact(t *testing.T) {
	obs := &countObserver{}
	h, addr := startServer(t, session.Config{Workers: 2, PublishLatency: func(string) fanout.Observer { return obs }})
	var cs []*wstest.Client
	for i := 0; i < 3; i++ {
		c := dialWith(t, addr, "/app/app-key", "", nil)
		expectConnected(t, c)
		if err := c.Subscribe("m", "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for i := 0; i < 2; i++ {
		if err := h.Publish("app-id", herald.Event{Name: "e", Channel: "m", Data: `{"n":1}`}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs {
		for i := 0; i < 2; i++ {
			if _, err := c.Expect("e", patience); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := h.AppMetrics()[0]
	// Each: connection_established, subscription_succeeded, 2 events = 4 frames; 1 message in.
	if m.Connections != 3 || m.NewConnections != 3 || m.Disconnections != 0 || m.MessagesSent != 12 ||
		m.MessagesReceived != 3 || m.Channels != 1 || m.Subscriptions != 3 || m.BytesSent == 0 || m.BytesReceived == 0 {
		t.Fatalf("metrics %+v", m)
	}
	if obs.n.Load() != 2 || obs.bad.Load() != 0 {
		t.Fatalf("%d latency observations (%d out of range), want 2", obs.n.Load(), obs.bad.Load())
	}
	for _, c := range cs {
		c.Close()
	}
	poll.Until(t, patience, "disconnections counted", func() (bool, string) {
		m := h.AppMetrics()[0]
		return m.Disconnections == 3 && m.Connections == 0 && m.Channels == 0 && m.Subscriptions == 0, fmt.Sprintf("%+v", m)
	})
	if d := h.QueueDepths(); len(d) != 2 {
		t.Fatalf("QueueDepths = %v, want one per worker", d)
	}
}

// TestZeroLimitsMeanDefaults runs an app whose Limits are left at zero ("use the defaults")
// and checks it works as one with herald.DefaultLimits: connections, public, private and
// presence subscriptions, client events within the default rate and REST-style publishes,
// up to the default channels per connection and no further.
func TestZeroLimitsMeanDefaults(t *testing.T) {
	zero := &herald.App{ID: "z", Key: "z-key", Secret: "z-secret", EnableClientMessages: true}
	h, addr := startServerApps(t, session.Config{}, zero)
	const private, presence = "private-zero", "presence-zero"
	sign := func(s string) string { return zero.Key + ":" + pusher.Sign(zero.Secret, s) }
	join := func(user string) *wstest.Client {
		c := dialWith(t, addr, "/app/z-key", "", nil)
		sid := expectConnected(t, c)
		data := `{"user_id":"` + user + `","user_info":{"name":"` + user + `"}}`
		for _, s := range []struct{ ch, auth, data string }{
			{"public-zero", "", ""},
			{private, sign(sid + ":" + private), ""},
			{presence, sign(sid + ":" + presence + ":" + data), data},
		} {
			if err := c.Subscribe(s.ch, s.auth, s.data); err != nil {
				t.Fatal(err)
			}
			m, err := c.Read(patience)
			if err != nil || m.Event != "pusher_internal:subscription_succeeded" || m.Channel != s.ch {
				t.Fatalf("subscribing %s to %s: got %s %s %s, %v; want its subscription_succeeded", user, s.ch, m.Event, m.Channel, m.Data, err)
			}
		}
		return c
	}
	sender, receiver := join("u1"), join("u2")
	if _, err := sender.Expect("pusher_internal:member_added", patience); err != nil {
		t.Fatalf("sender waiting for u2's member_added: %v", err)
	}

	// Within the default rate (10 a second, burst 10): every client event arrives.
	const events = 5
	for i := 0; i < events; i++ {
		if err := sender.WriteJSON(map[string]any{"event": "client-zero", "channel": private, "data": map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < events; i++ {
		m, err := receiver.Read(patience)
		if err != nil || m.Event != "client-zero" || m.DataString() != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("receiver waiting for client event %d: got %s %s, %v", i, m.Event, m.Data, err)
		}
	}
	if err := h.Publish("z", herald.Event{Name: "rest", Channel: "public-zero", Data: "{}"}); err != nil {
		t.Fatalf("publish to an app with zero limits: %v", err)
	}
	if m, err := receiver.Read(patience); err != nil || m.Event != "rest" {
		t.Fatalf("receiver waiting for the published event: got %s %s, %v", m.Event, m.Data, err)
	}

	// The default channels per connection (3 joined so far) are accepted; one more is not.
	for i := 3; i < herald.DefaultLimits.MaxChannelsPerConn; i++ {
		if err := sender.Subscribe(fmt.Sprintf("c%d", i), "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := sender.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
			t.Fatalf("subscription %d of %d: %v", i+1, herald.DefaultLimits.MaxChannelsPerConn, err)
		}
	}
	if err := sender.Subscribe("one-too-many", "", ""); err != nil {
		t.Fatal(err)
	}
	m, err := sender.Expect("pusher:subscription_error", patience)
	if err != nil || !strings.Contains(string(m.Data), "LimitReached") {
		t.Fatalf("subscription over the default limit of %d: got %s %s, %v; want LimitReached",
			herald.DefaultLimits.MaxChannelsPerConn, m.Event, m.Data, err)
	}
}
