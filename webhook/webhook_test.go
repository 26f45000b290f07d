package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// patience bounds every wait for something that normally takes milliseconds.
const patience = 20 * time.Second

var testApp = App{ID: "app-id", Key: "app-key", Secret: "app-secret"}

// request is one webhook request as the receiver got it.
type request struct {
	Key, Signature, Extra string
	Body                  []byte
	TimeMS                int64
	Events                []map[string]any
}

// receiver is a local webhook endpoint that records what it receives; answer, when set,
// chooses each request's status (before it is recorded; 2xx requests only are recorded).
type receiver struct {
	mu     sync.Mutex
	got    []request
	calls  int
	answer func(n int) int
	srv    *httptest.Server
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.calls++
	n := r.calls
	answer := r.answer
	r.mu.Unlock()
	code := 200
	if answer != nil {
		code = answer(n)
	}
	if code/100 == 2 {
		var d struct {
			TimeMS int64            `json:"time_ms"`
			Events []map[string]any `json:"events"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			code = 400
		} else {
			r.mu.Lock()
			r.got = append(r.got, request{Key: req.Header.Get("X-Pusher-Key"), Signature: req.Header.Get("X-Pusher-Signature"),
				Extra: req.Header.Get("X-Extra"), Body: b, TimeMS: d.TimeMS, Events: d.Events})
			r.mu.Unlock()
		}
	}
	w.WriteHeader(code)
}

func startReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

// events lists every event received, as "name channel [user] [n]".
func (r *receiver) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.got {
		for _, e := range q.Events {
			s := fmt.Sprint(e["name"], " ", e["channel"])
			if u, ok := e["user_id"]; ok {
				s += fmt.Sprint(" ", u)
			}
			if n, ok := e["subscription_count"]; ok {
				s += fmt.Sprint(" ", n)
			}
			if ev, ok := e["event"]; ok {
				s += fmt.Sprint(" ", ev)
			}
			out = append(out, s)
		}
	}
	return out
}

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, patience, what, cond)
}

// expectEvents waits until the receiver has exactly want, failing on a wrong prefix.
func expectEvents(t *testing.T, r *receiver, want ...string) {
	t.Helper()
	eventually(t, strings.Join(want, "; "), func() (bool, string) {
		got := r.events()
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("received %q, want %q", got, want)
		}
		return len(got) == len(want), fmt.Sprint(got)
	})
}

func newSender(t *testing.T, hooks []Webhook, o Options) (*Sender, herald.ActivityObserver) {
	t.Helper()
	if o.BatchInterval == 0 {
		o.BatchInterval = 10 * time.Millisecond
	}
	if o.LeaveDelay == 0 {
		o.LeaveDelay = 100 * time.Millisecond
	}
	if o.RetryMinBackoff == 0 {
		o.RetryMinBackoff = 10 * time.Millisecond
		o.RetryMaxBackoff = 50 * time.Millisecond
	}
	a := testApp
	a.Webhooks = hooks
	s := New([]App{a, {ID: "quiet", Key: "k", Secret: "s"}}, o, nil)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if s.Observer("quiet") != nil || len(s.Apps()) != 1 {
		t.Fatal("an app without webhooks has an observer")
	}
	return s, s.Observer("app-id")
}

func act(k herald.ActivityKind, channel string) *herald.Activity {
	return &herald.Activity{Kind: k, App: "app-id", Channel: channel, Time: time.Now()}
}

// TestSignedBatches: events arrive batched in {"time_ms", "events"} with Pusher's field names,
// the app key, the configured headers, and a signature that is the HMAC-SHA256 of the body.
func TestSignedBatches(t *testing.T) {
	r := startReceiver(t)
	_, o := newSender(t, []Webhook{{URL: r.srv.URL, Headers: map[string]string{"X-Extra": "v"}}}, Options{BatchInterval: 200 * time.Millisecond})
	if o.Wants() != herald.Activities(herald.ChannelOccupied, herald.ChannelVacated, herald.MemberAdded, herald.MemberRemoved,
		herald.ClientEvent, herald.CacheMiss, herald.SubscriptionCount) {
		t.Fatalf("wants %b", o.Wants())
	}
	before := time.Now().UnixMilli()
	o.Observe(act(herald.ChannelOccupied, "presence-a"))
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "presence-a", UserID: "u1"})
	o.Observe(&herald.Activity{Kind: herald.ClientEvent, Channel: "presence-a", Event: "client-x", Data: `{"a":1}`, SocketID: "1.2", UserID: "u1"})
	o.Observe(&herald.Activity{Kind: herald.CacheMiss, Channel: "cache-a"})
	o.Observe(&herald.Activity{Kind: herald.SubscriptionCount, Channel: "presence-a", Count: 1})
	o.Observe(&herald.Activity{Kind: herald.SubscriptionCount, Channel: "presence-a", Count: 2}) // replaces 1 in the batch
	o.Observe(&herald.Activity{Kind: herald.Subscribed, Channel: "presence-a"})                  // no webhook event
	expectEvents(t, r, "channel_occupied presence-a", "member_added presence-a u1", "client_event presence-a u1 client-x",
		"cache_miss cache-a", "subscription_count presence-a 2")
	r.mu.Lock()
	q := r.got[0]
	r.mu.Unlock()
	if len(r.got) != 1 {
		t.Fatalf("%d requests; want the 5 events in one batch", len(r.got))
	}
	if q.Key != "app-key" || q.Extra != "v" || q.Signature != Sign("app-secret", q.Body) || q.TimeMS < before {
		t.Fatalf("request key %q extra %q signature %q (want %q) time_ms %d", q.Key, q.Extra, q.Signature, Sign("app-secret", q.Body), q.TimeMS)
	}
	ce := q.Events[2]
	if ce["data"] != `{"a":1}` || ce["socket_id"] != "1.2" || ce["user_id"] != "u1" {
		t.Fatalf("client_event %v", ce)
	}
	if _, ok := q.Events[0]["user_id"]; ok {
		t.Fatalf("channel_occupied carries fields it has not: %v", q.Events[0])
	}
	// A known signature, from `printf '{}' | openssl dgst -sha256 -hmac app-secret`.
	if got := Sign("app-secret", []byte("{}")); got != "bd9549eb87a414d3df28b5a60ea86d4a11e2f1c6258edbd18f56d3c23c0f908d" {
		t.Fatalf("Sign = %s", got)
	}
}

// TestFilterAndTypes: a webhook gets only its event types, of the channels its filter keeps.
func TestFilterAndTypes(t *testing.T) {
	all, some := startReceiver(t), startReceiver(t)
	_, o := newSender(t, []Webhook{
		{URL: all.srv.URL},
		{URL: some.srv.URL, EventTypes: []string{MemberAdded}, Filter: Filter{ChannelNameStartsWith: "presence-", ChannelNameEndsWith: "-vip"}},
	}, Options{})
	o.Observe(act(herald.ChannelOccupied, "presence-room-vip"))
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "presence-room-vip", UserID: "a"})
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "presence-room", UserID: "b"})
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "private-room-vip", UserID: "c"})
	expectEvents(t, all, "channel_occupied presence-room-vip", "member_added presence-room-vip a", "member_added presence-room b",
		"member_added private-room-vip c")
	expectEvents(t, some, "member_added presence-room-vip a")
}

// TestLeaveDelay: channel_vacated and member_removed wait the leave delay; occupied (added)
// again within it cancels both.
func TestLeaveDelay(t *testing.T) {
	r := startReceiver(t)
	const delay = 300 * time.Millisecond
	_, o := newSender(t, []Webhook{{URL: r.srv.URL}}, Options{LeaveDelay: delay})
	o.Observe(act(herald.ChannelOccupied, "a"))
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "presence-a", UserID: "u"})
	expectEvents(t, r, "channel_occupied a", "member_added presence-a u")
	// A reload: vacated then occupied, removed then added.
	o.Observe(act(herald.ChannelVacated, "a"))
	o.Observe(&herald.Activity{Kind: herald.MemberRemoved, Channel: "presence-a", UserID: "u"})
	o.Observe(act(herald.ChannelOccupied, "a"))
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "presence-a", UserID: "u"})
	// A real leave: it arrives after the delay.
	left := time.Now()
	o.Observe(act(herald.ChannelVacated, "b"))
	expectEvents(t, r, "channel_occupied a", "member_added presence-a u", "channel_vacated b")
	if d := time.Since(left); d < delay {
		t.Fatalf("channel_vacated arrived %v after the leave; the delay is %v", d, delay)
	}
}

// TestDownThenUp: the endpoint refuses connections, then answers 503, then 200: every event
// arrives, in order, each once; failures and retries are counted.
func TestDownThenUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connection refused
	s, o := newSender(t, []Webhook{{URL: "http://" + addr + "/hook"}}, Options{MaxBatch: 3})
	var want []string
	for i := range 10 {
		ch := fmt.Sprint("c", i%2)
		o.Observe(&herald.Activity{Kind: herald.ClientEvent, Channel: ch, Event: fmt.Sprint("client-", i), Data: "d"})
		want = append(want, fmt.Sprintf("client_event %s client-%d", ch, i))
	}
	eventually(t, "failed attempts while down", func() (bool, string) {
		st := s.Stats()[0]
		return st.Failed >= 3 && st.Retried >= 2, fmt.Sprintf("%+v", st)
	})
	r := &receiver{answer: func(n int) int {
		if n <= 2 {
			return 503
		}
		return 200
	}}
	var srv *http.Server
	eventually(t, "the endpoint back on its port", func() (bool, string) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return false, err.Error()
		}
		srv = &http.Server{Handler: r}
		go srv.Serve(ln)
		return true, ""
	})
	t.Cleanup(func() { srv.Close() })
	expectEvents(t, r, want...)
	eventually(t, "every event counted as sent, nothing dropped", func() (bool, string) {
		st := s.Stats()[0]
		if st.DroppedExpired+st.DroppedQueueFull+st.DroppedRejected != 0 {
			t.Fatalf("stats %+v", st)
		}
		return st.Sent == 10 && st.QueueDepth == 0, fmt.Sprintf("%+v", st)
	})
}

// TestBackoff: each wait is between half and all of min × 2ⁿ, capped at max.
func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 3*time.Second
	retry := Options{RetryMinBackoff: lo, RetryMaxBackoff: hi}.retry()
	for n := range 40 {
		full := hi
		if n < 5 {
			full = lo << n
		}
		for range 50 {
			if d := retry.Wait(n); d < full/2 || d > full {
				t.Fatalf("backoff(%d) = %v, want %v..%v", n, d, full/2, full)
			}
		}
	}
}

// TestDropOldest: while a request hangs, observing never blocks and the queue keeps its
// newest events; the oldest are dropped and counted.
func TestDropOldest(t *testing.T) {
	inFlight, release := make(chan struct{}, 1), make(chan struct{})
	r := &receiver{answer: func(n int) int {
		if n == 1 {
			inFlight <- struct{}{}
			<-release
		}
		return 200
	}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	s, o := newSender(t, []Webhook{{URL: srv.URL}}, Options{QueueSize: 5})
	o.Observe(&herald.Activity{Kind: herald.CacheMiss, Channel: "first"})
	<-inFlight
	start := time.Now()
	for i := range 10_000 {
		o.Observe(&herald.Activity{Kind: herald.CacheMiss, Channel: fmt.Sprint("c", i)})
	}
	t.Logf("10,000 events observed in %v while the endpoint hangs", time.Since(start))
	st := s.Stats()[0]
	if st.DroppedQueueFull != 10_000-5 || st.QueueDepth != 5 {
		t.Fatalf("stats %+v, want %d dropped and 5 queued", st, 10_000-5)
	}
	close(release)
	expectEvents(t, r, "cache_miss first", "cache_miss c9995", "cache_miss c9996", "cache_miss c9997", "cache_miss c9998", "cache_miss c9999")
}

// TestRefusedAndExpired: a 4xx drops the batch at once; retries stop after RetryFor.
func TestRefusedAndExpired(t *testing.T) {
	r := &receiver{answer: func(int) int { return 403 }}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	s, o := newSender(t, []Webhook{{URL: srv.URL}}, Options{})
	o.Observe(act(herald.CacheMiss, "x"))
	eventually(t, "the refusal", func() (bool, string) {
		st := s.Stats()[0]
		return st.DroppedRejected == 1, fmt.Sprintf("%+v", st)
	})
	if st := s.Stats()[0]; st.Retried != 0 || st.Failed != 1 {
		t.Fatalf("a 403 was retried: %+v", st)
	}
	r5 := &receiver{answer: func(int) int { return 500 }}
	srv5 := httptest.NewServer(r5)
	t.Cleanup(srv5.Close)
	s5, o5 := newSender(t, []Webhook{{URL: srv5.URL}}, Options{RetryFor: 200 * time.Millisecond})
	o5.Observe(act(herald.CacheMiss, "x"))
	eventually(t, "retries to run out", func() (bool, string) {
		st := s5.Stats()[0]
		return st.DroppedExpired == 1, fmt.Sprintf("%+v", st)
	})
	if st := s5.Stats()[0]; st.Retried < 1 {
		t.Fatalf("a 500 was not retried: %+v", st)
	}
}

// TestCloseFlushes: Close sends what is queued, delayed leaves included, before it returns.
func TestCloseFlushes(t *testing.T) {
	r := startReceiver(t)
	s, o := newSender(t, []Webhook{{URL: r.srv.URL}}, Options{LeaveDelay: time.Hour, BatchInterval: time.Hour})
	o.Observe(act(herald.ChannelOccupied, "a"))
	o.Observe(act(herald.ChannelVacated, "b"))
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.events(); !slices.Equal(got, []string{"channel_occupied a", "channel_vacated b"}) {
		t.Fatalf("after Close: %q", got)
	}
	// And a Close whose deadline passes while the endpoint hangs gives up.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server watches the connection: a client that goes ends the context
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	s2, o2 := newSender(t, []Webhook{{URL: hang.URL}}, Options{})
	o2.Observe(act(herald.CacheMiss, "x"))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := s2.Close(ctx2); err == nil {
		t.Fatal("Close past its deadline: no error")
	}
	if st := s2.Stats()[0]; st.DroppedExpired != 1 {
		t.Fatalf("stats %+v: the abandoned event is not counted", st)
	}
}

func TestCheckConfig(t *testing.T) {
	for _, u := range []string{"", "ftp://x/y", "http://", "::nope"} {
		if CheckURL(u) == nil {
			t.Errorf("CheckURL(%q): no error", u)
		}
	}
	if err := CheckURL("https://backend.example/pusher/webhooks"); err != nil {
		t.Error(err)
	}
	if err := CheckEventType("channel_exploded"); err == nil || !strings.Contains(err.Error(), "channel_occupied") {
		t.Errorf("unknown event type: %v", err)
	}
	for _, n := range EventTypes {
		if err := CheckEventType(n); err != nil {
			t.Error(err)
		}
	}
	if CheckHeader("X Bad", "v") == nil || CheckHeader("X-Ok", "a\nb") == nil || CheckHeader("X-Pusher-Signature", "x") == nil {
		t.Error("a bad header passes")
	}
}

// TestLeaveNotSentWhenBack: a leave whose channel is occupied again when its delay ends (the
// return seen by another node of the cluster, which sent its own channel_occupied) is not sent.
func TestLeaveNotSentWhenBack(t *testing.T) {
	r := startReceiver(t)
	var mu sync.Mutex
	var asked []string
	present := func(app, channel, user string) bool {
		mu.Lock()
		asked = append(asked, app+" "+channel+" "+user)
		mu.Unlock()
		return channel == "back"
	}
	_, o := newSender(t, []Webhook{{URL: r.srv.URL}}, Options{Present: present})
	o.Observe(act(herald.ChannelVacated, "back"))
	o.Observe(&herald.Activity{Kind: herald.MemberRemoved, Channel: "back", UserID: "u"})
	o.Observe(act(herald.ChannelVacated, "gone"))
	expectEvents(t, r, "channel_vacated gone")
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(asked, "app-id back u") || !slices.Contains(asked, "app-id gone ") {
		t.Fatalf("Present was asked %q", asked)
	}
}

// TestTimeoutRetried: a request the endpoint does not answer within Options.Timeout is a
// failure, retried: the event arrives with the next attempt.
func TestTimeoutRetried(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			<-r.Context().Done() // never answers: the client gives up
			return
		}
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	s, o := newSender(t, []Webhook{{URL: srv.URL}}, Options{Timeout: 200 * time.Millisecond})
	o.Observe(act(herald.CacheMiss, "slow"))
	eventually(t, "the retry after the timeout, answered", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1 && s.Stats()[0].Sent == 1, fmt.Sprint(calls, " calls")
	})
	if st := s.Stats()[0]; st.Failed != 1 || st.Retried != 1 || st.Sent != 1 || !strings.Contains(got[0], `"channel":"slow"`) {
		t.Fatalf("stats %+v, body %s", st, got[0])
	}
}
