package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/session"
)

var testApp = herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret"}

// patience is how long a test lets anything take that normally takes milliseconds: every
// wait, delivery and phase deadline. Tests run on busy machines (two cores shared with other
// builds, -race), so it is generous; a test that passes never waits it out.
const patience = 30 * time.Second

// startHerald serves a real herald session server and REST API on 127.0.0.1, with wrap (when not nil)
// between the network and the API, and returns a target for it. The server is this process,
// so its CPU and RSS are read from our own /proc entry.
func startHerald(t *testing.T, wrap func(http.Handler) http.Handler) Target {
	t.Helper()
	target, _ := startServer(t, session.Config{MaxConnections: 1000}, wrap)
	return target
}

// startServer is startHerald with a session server configuration; it also returns the node.
func startServer(t *testing.T, cfg session.Config, wrap func(http.Handler) http.Handler) (Target, *session.Server) {
	t.Helper()
	return startNode(t, cfg, wrap, nil, "")
}

// startNode is startServer for a node of a cluster on bus (none when bus is nil), as node id.
func startNode(t *testing.T, cfg session.Config, wrap func(http.Handler) http.Handler, bus *memory.Bus, id string) (Target, *session.Server) {
	t.Helper()
	return startNodeOf(t, testApp, cfg, wrap, bus, id)
}

// startNodeOf is startNode serving app.
func startNodeOf(t *testing.T, app herald.App, cfg session.Config, wrap func(http.Handler) http.Handler, bus *memory.Bus, id string) (Target, *session.Server) {
	t.Helper()
	apps := herald.NewStaticApps([]herald.App{app})
	newState := cluster.LocalState(cluster.Config{})
	if bus != nil {
		mux := new(broker.Mux)
		b := bus.Attach(memory.Config{NodeID: id}, mux.Receive)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		newState = cluster.ReplicatedState(cluster.Config{}, b, memory.NewHistory(b), mux.Handle, nil)
	}
	h, err := session.New(cfg, apps, newState, nil)
	if err != nil {
		t.Fatal(err)
	}
	health := func() httpapi.HealthReport {
		st := h.Stats()
		r := httpapi.HealthReport{Status: "ok", Channels: st.Channels}
		r.Connections.Current = st.Connections
		return r
	}
	var handler http.Handler = httpapi.New(httpapi.Config{}, apps, h, health, nil, nil)
	if wrap != nil {
		handler = wrap(handler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		_ = h.Shutdown(context.Background())
	})
	addr := ln.Addr().String()
	return Target{WS: "ws://" + addr, REST: "http://" + addr, ServerPIDs: []int{os.Getpid()}, Timeout: patience}.withDefaults(), h
}

func TestIdle(t *testing.T) {
	target := startHerald(t, nil)
	rep, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 50, Channels: 5})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.Established != 50 || rep.Setup.Failed != 0 || rep.Lost.Count != 0 {
		t.Fatalf("setup %+v, lost %+v; want 50 established, none failed or lost", rep.Setup, rep.Lost)
	}
	if rep.Setup.Seconds <= 0 || rep.Setup.RatePerSec <= 0 {
		t.Errorf("setup time %v s, rate %v/s; want both positive", rep.Setup.Seconds, rep.Setup.RatePerSec)
	}
	if r := rep.ServerRSS; r == nil || r.BaselineBytes <= 0 || r.AfterBytes <= 0 || r.SettleSeconds <= 0 {
		t.Fatalf("server RSS %+v: want baseline, after and settle time", r)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"50 established, 0 failed", "per conn", "KiB"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	checkJSON(t, rep, "per_conn_bytes")
}

func TestFanout(t *testing.T) {
	target := startHerald(t, nil)
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 50, Events: 3, Interval: 100 * time.Millisecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Delivery
	if d.Expected != 150 || d.Delivered != 150 || d.Received != 150 || d.Percent != 100 || !d.Complete {
		t.Fatalf("delivery %+v; want all 150 delivered", d)
	}
	if d.Missing != 0 || d.Duplicated != 0 || d.OutOfOrder != 0 || d.Unexpected != 0 {
		t.Fatalf("delivery %+v; want no missing, duplicated, out-of-order or unexpected", d)
	}
	l := rep.Latency
	if l.Count != 150 || l.MinMs <= 0 || l.P50Ms < l.MinMs || l.MaxMs < l.P99Ms {
		t.Fatalf("latency %+v: want 150 positive, ordered samples", l)
	}
	for _, e := range rep.PerEvent {
		if e.Latency.Count != 50 || e.Latency.MinMs <= 0 || e.PublishMs <= 0 {
			t.Errorf("event %d: %+v; want 50 positive latencies and a publish time", e.Seq, e)
		}
	}
	if u := rep.ServerUsage; u == nil || u.RSSBytes <= 0 || u.CPUSeconds < 0 {
		t.Errorf("server usage %+v: want CPU time and RSS", u)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"150 of 150 (100.00%)", "missing 0, duplicated 0, out of order 0", "event 3", "us per delivery"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	checkJSON(t, rep, "p99_9_ms")
}

// interceptSeq calls act for the publish request of event seq instead of the API; every other
// request goes through. act gets the API and a copy of the request's body.
func interceptSeq(seq int, act func(api http.Handler, w http.ResponseWriter, r *http.Request, body []byte)) func(http.Handler) http.Handler {
	marker := []byte(`\"seq\":` + strconv.Itoa(seq) + `,`)
	return func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				api.ServeHTTP(w, r)
				return
			}
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, marker) {
				act(api, w, r, body)
				return
			}
			api.ServeHTTP(w, r)
		})
	}
}

// replay serves a copy of a request, with its body, to h.
func replay(h http.Handler, r *http.Request, body []byte) {
	c := r.Clone(context.Background())
	c.Body = io.NopCloser(bytes.NewReader(body))
	h.ServeHTTP(httptest.NewRecorder(), c)
}

// fanoutThrough runs fanout (50 subscribers, 3 events) through wrap, which must deliver every
// event in the end: the run waits for them.
func fanoutThrough(t *testing.T, wrap func(http.Handler) http.Handler) *FanoutReport {
	t.Helper()
	target := startHerald(t, wrap)
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 50, Events: 3, Interval: 100 * time.Millisecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestFanoutReportsMissing: the server accepts event 2 but never delivers it.
func TestFanoutReportsMissing(t *testing.T) {
	// The run cannot complete, so it waits all of its wait. Event 3's publish is answered only
	// once events 1 and 3 have reached all 50 subscribers (the run's timeline, never started,
	// counts every delivery), so that wait starts with every delivery that will ever come in
	// and can be short whatever the machine's speed.
	tl := NewTimeline()
	delivered := func() int64 { tl.mu.Lock(); defer tl.mu.Unlock(); return tl.delivered }
	swallow2 := interceptSeq(2, func(_ http.Handler, w http.ResponseWriter, _ *http.Request, _ []byte) {
		io.WriteString(w, "{}")
	})
	deliver3 := interceptSeq(3, func(api http.Handler, w http.ResponseWriter, r *http.Request, _ []byte) {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		for start := time.Now(); delivered() < 100; time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > patience {
				http.Error(w, fmt.Sprintf("waited %v for events 1 and 3 to reach 50 subscribers; saw %d deliveries", patience, delivered()), http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
	target := startHerald(t, func(api http.Handler) http.Handler { return swallow2(deliver3(api)) })
	target.Timeline = tl
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 50, Events: 3, Interval: 100 * time.Millisecond, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Delivery
	if d.Missing != 50 || d.Delivered != 100 || d.Expected != 150 || d.Complete {
		t.Fatalf("delivery %+v; want 50 missing of 150, incomplete", d)
	}
	if d.Duplicated != 0 || d.OutOfOrder != 0 || d.Unexpected != 0 {
		t.Fatalf("delivery %+v; only missing events expected", d)
	}
	if rep.PerEvent[1].Latency.Count != 0 || rep.PerEvent[2].Latency.Count != 50 {
		t.Fatalf("per-event counts %d, %d; want 0 for event 2, 50 for event 3", rep.PerEvent[1].Latency.Count, rep.PerEvent[2].Latency.Count)
	}
	if d.Percent < 66.6 || d.Percent > 66.7 {
		t.Fatalf("delivery %.2f%%; want 66.67%%", d.Percent)
	}
}

// TestFanoutReportsDuplicates: the server delivers event 2 twice.
func TestFanoutReportsDuplicates(t *testing.T) {
	rep := fanoutThrough(t, interceptSeq(2, func(api http.Handler, w http.ResponseWriter, r *http.Request, body []byte) {
		replay(api, r, body)
		api.ServeHTTP(w, r)
	}))
	d := rep.Delivery
	if d.Duplicated != 50 || d.Missing != 0 || d.OutOfOrder != 0 || d.Delivered != 150 || d.Received != 200 {
		t.Fatalf("delivery %+v; want 50 duplicates, nothing missing or out of order", d)
	}
}

// TestFanoutReportsOutOfOrder: the server holds event 2 back and delivers it after event 3.
func TestFanoutReportsOutOfOrder(t *testing.T) {
	var mu sync.Mutex
	var held func()
	wrap := func(api http.Handler) http.Handler {
		hold := interceptSeq(2, func(api http.Handler, w http.ResponseWriter, r *http.Request, body []byte) {
			mu.Lock()
			held = func() { replay(api, r, body) }
			mu.Unlock()
			io.WriteString(w, "{}")
		})(api)
		release := interceptSeq(3, func(_ http.Handler, w http.ResponseWriter, r *http.Request, _ []byte) {
			hold.ServeHTTP(w, r)
			mu.Lock()
			defer mu.Unlock()
			if held != nil {
				held()
			}
		})
		return release(hold)
	}
	d := fanoutThrough(t, wrap).Delivery
	if d.OutOfOrder != 50 || d.Missing != 0 || d.Duplicated != 0 || d.Delivered != 150 {
		t.Fatalf("delivery %+v; want 50 out of order, nothing missing or duplicated", d)
	}
}

// TestUnreachableServerFailsFast: nothing listens on the port.
func TestUnreachableServerFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Fanout(t.Context(), FanoutConfig{Target: Target{WS: "ws://" + addr, REST: "http://" + addr}, Subs: 500})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v; want a connection refused error", err)
	}
	if d := time.Since(start); d > patience {
		t.Fatalf("took %v to fail; want well under the 60s timeout", d)
	}
}

// TestSilentServerTimesOut: the server accepts TCP connections and never answers.
func TestSilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	start := time.Now()
	_, err = Idle(t.Context(), IdleConfig{Target: Target{WS: "ws://" + ln.Addr().String(), Timeout: 300 * time.Millisecond}, Conns: 20})
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("err = %v; want a deadline error", err)
	}
	if d := time.Since(start); d > patience {
		t.Fatalf("took %v to fail with a 300ms timeout; want well under the 60s default", d)
	}
}

// TestClosingServerFails: the server closes every connection at once.
func TestClosingServerFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	start := time.Now()
	_, err = Idle(t.Context(), IdleConfig{Target: Target{WS: "ws://" + ln.Addr().String()}, Conns: 300})
	if err == nil || !strings.Contains(err.Error(), "handshake") {
		t.Fatalf("err = %v; want a handshake error", err)
	}
	if d := time.Since(start); d > patience {
		t.Fatalf("took %v to fail; want well under the 60s timeout", d)
	}
}

// TestWrongKeyFails: herald refuses an unknown app key with a Pusher error.
func TestWrongKeyFails(t *testing.T) {
	target := startHerald(t, nil)
	target.Key = "no-such-key"
	_, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 5})
	if err == nil || !strings.Contains(err.Error(), "pusher:error") {
		t.Fatalf("err = %v; want the server's pusher:error", err)
	}
}

// TestRejectedPublishFails: a wrong secret makes the REST call fail with the server's answer.
func TestRejectedPublishFails(t *testing.T) {
	target := startHerald(t, nil)
	target.Secret = "wrong"
	_, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 5, Events: 2, Interval: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v; want a 401 from the REST API", err)
	}
}

func TestBadServerPID(t *testing.T) {
	_, err := Idle(t.Context(), IdleConfig{Target: Target{ServerPIDs: []int{1 << 30}}})
	if err == nil || !strings.Contains(err.Error(), "--server-pid") {
		t.Fatalf("err = %v; want a --server-pid error", err)
	}
}

// TestRateLimitsConnects: 20 connections at 100/s take at least 190ms.
func TestRateLimitsConnects(t *testing.T) {
	target := startHerald(t, nil)
	target.Rate = 100
	rep, err := Idle(t.Context(), IdleConfig{Target: target, Conns: 20, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.Seconds < 0.19 || rep.Setup.Established != 20 {
		t.Fatalf("setup %+v; want 20 in at least 0.19 s", rep.Setup)
	}
}

func TestParseBench(t *testing.T) {
	data := eventData(7, 1234567890123, 1234567000000, 100)
	herald, _ := json.Marshal(map[string]string{"event": "bench", "channel": "fanout", "data": data})
	spaced := `{ "event" : "bench", "channel": "fanout", "data": ` + string(mustJSON(data)) + ` }`
	object := `{"event":"bench","channel":"fanout","data":{"seq":7,"t":1234567890123,"s":1234567000000}}`
	for _, p := range []string{string(herald), spaced, object} {
		seq, sent, sched, ch, ok := parseBench([]byte(p))
		if !ok || seq != 7 || sent != 1234567890123 || sched != 1234567000000 || string(ch) != "fanout" {
			t.Errorf("parseBench(%s) = %d, %d, %d, %q, %v; want 7, 1234567890123, 1234567000000, fanout, true", p, seq, sent, sched, ch, ok)
		}
	}
	// An event without a schedule (another generator's, or an older one) was scheduled when sent.
	for _, p := range []string{`{"event":"bench","channel":"fanout","data":"{\"seq\":7,\"t\":99}"}`, `{"event":"bench","channel":"fanout","data":{"seq":7,"t":99}}`} {
		if _, sent, sched, _, ok := parseBench([]byte(p)); !ok || sent != 99 || sched != 99 {
			t.Errorf("parseBench(%s): sent %d, sched %d, %v; want 99, 99, true", p, sent, sched, ok)
		}
	}
	for _, p := range []string{`{"event":"pusher:ping","data":{}}`, `{"event":"other","data":"{\"seq\":1,\"t\":2}"}`, `{"event":"bench","data":"{}"}`} {
		if _, _, _, _, ok := parseBench([]byte(p)); ok {
			t.Errorf("parseBench(%s) = true; want false", p)
		}
	}
	if !isPusherPing([]byte(`{"event":"pusher:ping","data":{}}`)) || isPusherPing([]byte(`{"event":"x","data":"pusher:ping"}`)) {
		t.Error("isPusherPing misreads")
	}
}

func TestEventDataSize(t *testing.T) {
	for _, size := range []int{0, 10, 100, 1000} {
		d := eventData(3, time.Now().UnixNano(), 0, size)
		if size >= 60 && len(d) != size {
			t.Errorf("eventData(size %d) is %d bytes", size, len(d))
		}
		var v struct {
			Seq int   `json:"seq"`
			T   int64 `json:"t"`
			S   int64 `json:"s"`
		}
		if err := json.Unmarshal([]byte(d), &v); err != nil || v.Seq != 3 || v.T == 0 || v.S != v.T {
			t.Errorf("eventData(size %d) = %s: %v", size, d, err)
		}
	}
}

func TestDeliveryCount(t *testing.T) {
	// Subscriber A: 1 3 2 2 9 of events 1..4: 4 missing, one duplicate, 2 out of order, 9
	// unexpected. Subscriber B: nothing.
	var a, b track
	var firsts []int
	for _, seq := range []int{1, 3, 2, 2, 9} {
		if a.add(seq, 4) {
			firsts = append(firsts, seq)
		}
	}
	var d Delivery
	d.add(&a, 4, nil)
	d.add(&b, 4, nil)
	d.finish()
	want := Delivery{Expected: 8, Delivered: 3, Received: 5, Percent: 37.5, Missing: 5, Duplicated: 1, OutOfOrder: 1, Unexpected: 1}
	if d != want {
		t.Fatalf("count = %+v; want %+v", d, want)
	}
	if len(firsts) != 3 {
		t.Fatalf("latency samples %v; want the 3 first receipts", firsts)
	}
}

// TestDeliveryLateSubscriber: a subscription expects only what was published after it; seqs
// published before it (and received) count neither way; a failed publish is not expected.
func TestDeliveryLateSubscriber(t *testing.T) {
	tr := track{from: 100}
	var firsts int
	for _, seq := range []int{99, 100, 101, 102, 104, 200, 131} {
		if tr.add(seq, 1000) {
			firsts++
		}
	}
	var d Delivery
	d.add(&tr, 130, []int32{103, 5})
	d.finish()
	// Expected 101..130 but for the failed 103: 29. Received of those: 101, 102, 104.
	// 200 and 131 were never published by the end (130): unexpected.
	want := Delivery{Expected: 29, Delivered: 3, Received: 7, Missing: 26, Unexpected: 2, OutOfOrder: 1, Percent: 300.0 / 29}
	if d != want {
		t.Fatalf("count = %+v; want %+v", d, want)
	}
	if firsts != 5 {
		t.Fatalf("%d first receipts of expected events; want 5 (101 102 104 200 131)", firsts)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func checkJSON(t *testing.T, rep any, key string) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"`+key+`"`)) {
		t.Errorf("JSON report lacks %q: %s", key, b)
	}
}
