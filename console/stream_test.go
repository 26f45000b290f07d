package console

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/httpapi"
)

func TestStreamOverview(t *testing.T) {
	_, srv, src, _ := newTestConsole(t, nil)
	src.set(func(s *Sample) {
		s.Apps[0] = AppSample{ID: "a1", Connections: 3, Channels: 2, Subscriptions: 4}
		s.Refused["origin"] = 7
	})
	src.mu.Lock()
	src.top, src.channels = []ChannelCount{{"big", 3}, {"small", 1}}, 5
	src.mu.Unlock()
	s := openStream(t, srv.URL, "a1")
	ov := next(t, s, "overview", "a1's connections", func(ov overview) bool {
		return len(ov.Nodes) == 1 && ov.Nodes[0].Apps[0].Connections == 3
	})
	if ov.Node != "n1" || ov.App != "a1" || strings.Join(ov.Apps, ",") != "a1,a2" || ov.Channels != 5 ||
		len(ov.Top) != 2 || ov.Top[0] != (ChannelCount{"big", 3}) || ov.Nodes[0].Refused["origin"] != 7 || ov.Nodes[0].Apps[0].Subscriptions != 4 {
		t.Errorf("overview %+v", ov)
	}
	// Counters that grow become rates.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				src.set(func(s *Sample) {
					a := &s.Apps[0]
					a.NewConnections++
					a.MessagesIn += 2
					a.MessagesOut += 3
				})
			}
		}
	}()
	next(t, s, "overview", "rates above zero", func(ov overview) bool {
		a := ov.Nodes[0].Apps[0]
		return a.NewPerSec > 0 && a.InPerSec > a.NewPerSec && a.OutPerSec > a.InPerSec
	})
}

func TestStreamLogTurnsObserverOn(t *testing.T) {
	var mu sync.Mutex
	var refreshed []string
	c, srv, _, _ := newTestConsole(t, func(cfg *Config) {
		cfg.Refresh = func(app string) {
			mu.Lock()
			refreshed = append(refreshed, app)
			mu.Unlock()
		}
	})
	refreshes := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(refreshed, ",")
	}
	o := c.Observer("a1")
	if o == nil || c.Observer("nope") != nil {
		t.Fatal("Observer: want one for a1, none for an unknown app")
	}
	if o.Wants() != 0 {
		t.Fatalf("Wants %b with no page open; want 0 (tracing off)", o.Wants())
	}
	s := openStream(t, srv.URL, "a1")
	eventually(t, "Wants on while a page watches", func() bool { return o.Wants() == logKinds })
	eventually(t, "the node told to read Wants again", func() bool { return refreshes() == "a1" })
	s2 := openStream(t, srv.URL, "a1") // a second page: no change, no refresh
	next(t, s2, "overview", "the second page's overview", func(overview) bool { return true })
	s2.Close()
	if c.Observer("a2").Wants() != 0 {
		t.Error("a2's observer is on while only a1 is watched")
	}
	now := time.Now()
	for _, a := range []herald.Activity{
		{Kind: herald.ConnectionOpened, App: "a1", Time: now, SocketID: "1.2", Origin: "https://example.com"},
		{Kind: herald.SubscriptionCount, App: "a1", Time: now, Channel: "room", Count: 1}, // not a log kind
		{Kind: herald.Subscribed, App: "a1", Time: now, SocketID: "1.2", Channel: "room"},
		{Kind: herald.APIEvent, App: "a1", Time: now, Channel: "room", Event: "greet", Data: strings.Repeat("d", 2000)},
		{Kind: herald.ConnectionClosed, App: "a1", Time: now, SocketID: "1.2", Code: 4200},
		{Kind: herald.WebhookSent, App: "a1", Time: now, Channel: "room", Event: "channel_vacated", Code: 200},
	} {
		o.Observe(&a)
	}
	var got []entry
	next(t, s, "log", "five entries", func(b []entry) bool { got = append(got, b...); return len(got) >= 5 })
	want := []string{"connection_opened", "subscribed", "api_event", "connection_closed", "webhook_sent"}
	for i, e := range got {
		if i >= len(want) || e.Kind != want[i] {
			t.Fatalf("log %+v; want kinds %v", got, want)
		}
	}
	if got[0].SocketID != "1.2" || got[0].Origin != "https://example.com" || got[1].Channel != "room" ||
		got[2].Event != "greet" || len(got[2].Data) > maxDataBytes+len("…") || got[3].Code != 4200 || got[0].TimeMS != now.UnixMilli() ||
		got[4].Event != "channel_vacated" || got[4].Code != 200 {
		t.Errorf("log entries %+v", got)
	}
	s.Close()
	eventually(t, "Wants off once the page left", func() bool { return o.Wants() == 0 })
	if r := refreshes(); r != "a1,a1" {
		t.Errorf("refreshes %q; want a1 when the first page came and when the last left", r)
	}
	// Off, nothing is kept.
	o.Observe(&herald.Activity{Kind: herald.ConnectionOpened, App: "a1", SocketID: "9.9"})
	if w := c.watches["a1"]; w.seq != 5 {
		t.Errorf("ring holds %d entries after an activity while off; want 5", w.seq)
	}
}

func TestLogSampling(t *testing.T) {
	c, srv, _, _ := newTestConsole(t, func(cfg *Config) { cfg.EventsPerSecond = 10 })
	s := openStream(t, srv.URL, "a2")
	o := c.Observer("a2")
	eventually(t, "Wants on", func() bool { return o.Wants() != 0 })
	at := time.Now() // one instant: the bucket does not refill
	for i := 0; i < 1000; i++ {
		o.Observe(&herald.Activity{Kind: herald.ClientEvent, App: "a2", Time: at, Channel: "private-x", Event: "client-x"})
	}
	var n int
	next(t, s, "log", "the 10 admitted", func(b []entry) bool { n += len(b); return n >= 10 })
	if n != 10 {
		t.Errorf("%d entries reached the page; want 10", n)
	}
	ov := next(t, s, "overview", "sampled_out", func(ov overview) bool { return ov.Sampled > 0 })
	if ov.Sampled != 990 {
		t.Errorf("sampled out %d of 1000 at 10/s; want 990", ov.Sampled)
	}
}

func TestLogRingKeepsTheLatest(t *testing.T) {
	w := newWatch("a", 1<<20)
	from, _ := w.attach()
	at := time.Now()
	for i := 0; i < ringSize+10; i++ {
		w.Observe(&herald.Activity{Kind: herald.Subscribed, Time: at, Count: i})
	}
	got, next, lost, sampled := w.read(from, nil)
	if len(got) != ringSize || lost != 10 || next != ringSize+10 || sampled != 0 || got[0].Count != 10 || got[ringSize-1].Count != ringSize+9 {
		t.Errorf("read: %d entries (first %d), next %d, lost %d, sampled %d; want %d from 10, next %d, lost 10",
			len(got), got[0].Count, next, lost, sampled, ringSize, ringSize+10)
	}
}

func TestStreamLimitAndUnknownApp(t *testing.T) {
	_, srv, _, _ := newTestConsole(t, nil)
	for i := 0; i < maxStreams; i++ {
		openStream(t, srv.URL, "")
	}
	req, _ := http.NewRequest("GET", srv.URL+"/console/stream", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("stream %d: %d; want 503 with Retry-After", maxStreams+1, resp.StatusCode)
	}
}

func TestStreamUnknownApp(t *testing.T) {
	_, srv, _, _ := newTestConsole(t, nil)
	req, _ := http.NewRequest("GET", srv.URL+"/console/stream?app=nope", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown app: %d; want 404", resp.StatusCode)
	}
}

// TestStreamOutlivesPortDeadlines: on the metrics listener (an httpapi.Port with request
// and write deadlines of its own) a stream lives on past both.
func TestStreamOutlivesPortDeadlines(t *testing.T) {
	src := &fakeSource{sample: Sample{Apps: []AppSample{{ID: "a1"}}}}
	c := New(Config{Token: testToken, Apps: []string{"a1"}, Source: src, Interval: 50 * time.Millisecond}, nil)
	defer c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := httpapi.NewPort(ln, httpapi.PortConfig{Name: "metrics", MaxConns: 4, RequestTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, IdleTimeout: time.Second}, nil)
	srv := port.Server(c)
	go func() { _ = srv.Serve(port) }()
	defer srv.Close()
	s := openStream(t, "http://"+ln.Addr().String(), "a1")
	start := time.Now()
	next(t, s, "overview", "an overview 1.5 s in (5 times the deadlines)", func(ov overview) bool {
		return time.Since(start) > 1500*time.Millisecond
	})
}

func TestCloseEndsStreams(t *testing.T) {
	c, srv, _, _ := newTestConsole(t, nil)
	s := openStream(t, srv.URL, "a1")
	next(t, s, "overview", "the first overview", func(overview) bool { return true })
	c.Close()
	c.Close() // idempotent
	select {
	case <-s.Done:
	case <-time.After(patience):
		t.Fatal("stream still open after Close")
	}
	if c.Observer("a1").Wants() != 0 {
		t.Error("observer still on after Close")
	}
}

// TestNodesFromTheBus: the figures other nodes' consoles share on the bus reach this one
// through the mux its kind is registered on; malformed figures, this node's own and messages
// of other kinds are not shown, and a node that falls silent is forgotten. After Close the
// console's kind is routed no more.
func TestNodesFromTheBus(t *testing.T) {
	if BusKind != 32 {
		t.Fatalf("BusKind = %d: it is on the wire, it must stay 32", BusKind)
	}
	bus := memory.NewBus()
	var mux broker.Mux
	attach := func(id string, h herald.BusHandler) herald.Broker {
		b := bus.Attach(memory.Config{NodeID: id}, h)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}
	self := attach("n1", mux.Receive)
	c, srv, _, _ := newTestConsole(t, func(cfg *Config) { cfg.Bus, cfg.Route = self, mux.Handle })
	quiet := func(herald.BusMessage) {} // they have no interest: nothing reaches them
	n2, n3, n4 := attach("n2", quiet), attach("n3", quiet), attach("n4", quiet)
	b, _ := json.Marshal(nodeStats{Node: "liar", Apps: []appStats{{ID: "a1", Connections: 11}}, Refused: map[string]int64{"memory": 2}})
	// n2 speaks every 20 ms (as a node does every interval) until the page has seen it.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		ctx := context.Background()
		for {
			_ = n2.Publish(ctx, herald.BusMessage{Kind: BusKind, Channel: busChannel, Payload: b})
			_ = n3.Publish(ctx, herald.BusMessage{Kind: BusKind, Channel: busChannel, Payload: []byte("{not json")})
			_ = n4.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, Channel: busChannel, Payload: b}) // not the console's
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	s := openStream(t, srv.URL, "a1")
	ov := next(t, s, "overview", "node n2", func(ov overview) bool { return len(ov.Nodes) == 2 })
	close(stop)
	<-stopped
	if ov.Nodes[0].Node != "n1" || ov.Nodes[1].Node != "n2" || ov.Nodes[1].Apps[0].Connections != 11 || ov.Nodes[1].Refused["memory"] != 2 {
		t.Errorf("nodes %+v; want n1 (this one) then n2 with its figures", ov.Nodes)
	}
	if mux.Unhandled() == 0 {
		t.Error("n4's BusEvent messages were not dropped by the mux")
	}
	// Silent for five intervals, a node is forgotten.
	next(t, s, "overview", "n2 forgotten", func(ov overview) bool { return len(ov.Nodes) == 1 })
	c.Close()
	before := mux.Unhandled()
	mux.Receive(herald.BusMessage{Kind: BusKind, Channel: busChannel, Node: "n2", Payload: b})
	if mux.Unhandled() != before+1 {
		t.Error("the console's kind is still routed after Close")
	}
}

// TestStreamPointsNoneSkipped: a page gets every point of the charts once, in order, the
// history first and then each overview's points since the previous one, though the overviews
// (at the stream's tick) and the samples (every Interval, here shorter) do not keep step: a
// refusal that lives in one point is never skipped.
func TestStreamPointsNoneSkipped(t *testing.T) {
	c, srv, src, _ := newTestConsole(t, nil)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a refusal every few milliseconds: each point has its own rate
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				src.set(func(s *Sample) { s.Refused["origin"]++ })
			}
		}
	}()
	s := openStream(t, srv.URL, "")
	var got []point
	hist := next(t, s, "history", "the history", func(map[string][]point) bool { return true })
	got = append(got, hist["n1"]...)
	next(t, s, "overview", "20 points after the history", func(ov overview) bool {
		for node, pts := range ov.Points {
			if node != "n1" {
				t.Fatalf("points of node %q", node)
			}
			got = append(got, pts...)
		}
		return len(got) >= len(hist["n1"])+20
	})
	ring := c.history()["n1"]
	first := -1
	for i, p := range ring {
		if p.TimeMS == got[0].TimeMS {
			first = i
		}
	}
	if first < 0 || first+len(got) > len(ring) {
		t.Fatalf("the page's first point %d ms is not in the ring (%d points)", got[0].TimeMS, len(ring))
	}
	for i, p := range got {
		if p != ring[first+i] {
			t.Fatalf("point %d of the page: %+v; the ring's: %+v (a point skipped or repeated)", i, p, ring[first+i])
		}
	}
}
