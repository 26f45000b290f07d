package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/session"
)

// postedEvent is one single-event publish as the API received it.
type postedEvent struct {
	channel         string
	seq             int
	sched           int64 // the event's scheduled time (unix ns), from its data
	inFlight        int   // requests of the channel in flight with this one, itself included
	node, arrivedNs int64
}

// eventRecorder wraps herald's REST API as node and records every POST /events: its channel,
// its seq and scheduled time from the data, and how many requests of the same channel were
// in flight at once. With hold over 0, the first request of each channel waits (at most
// patience/2) until the first requests of hold channels have all arrived: publishers that
// did not run at once would never all be in flight, and the wait would time out.
type eventRecorder struct {
	mu       sync.Mutex
	events   []postedEvent
	inFlight map[string]int
	errs     []error
	hold     int
	firsts   int
	allIn    chan struct{}
}

func newEventRecorder(hold int) *eventRecorder {
	return &eventRecorder{inFlight: map[string]int{}, hold: hold, allIn: make(chan struct{})}
}

func (e *eventRecorder) fail(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

func (e *eventRecorder) wrap(node int64) func(http.Handler) http.Handler {
	return func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/events") || strings.HasSuffix(r.URL.Path, "/batch_events") {
				api.ServeHTTP(w, r)
				return
			}
			body, err := io.ReadAll(r.Body)
			if err != nil {
				e.fail(err)
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var ev restEvent
			var data struct {
				Seq int   `json:"seq"`
				S   int64 `json:"s"`
			}
			if err := json.Unmarshal(body, &ev); err != nil || json.Unmarshal([]byte(ev.Data), &data) != nil {
				e.fail(fmt.Errorf("body %q: %v", body, err))
			}
			if ev.Channel == "" || len(ev.Channels) > 0 {
				e.fail(fmt.Errorf("request names channel %q and channels %q; want one channel", ev.Channel, ev.Channels))
			}
			e.mu.Lock()
			e.inFlight[ev.Channel]++
			e.events = append(e.events, postedEvent{channel: ev.Channel, seq: data.Seq, sched: data.S,
				inFlight: e.inFlight[ev.Channel], node: node, arrivedNs: time.Now().UnixNano()})
			first := data.Seq == 1 && e.hold > 0
			if first {
				if e.firsts++; e.firsts == e.hold {
					close(e.allIn)
				}
			}
			e.mu.Unlock()
			if first {
				select {
				case <-e.allIn:
				case <-time.After(patience / 2):
					e.fail(fmt.Errorf("%s: the first requests of %d channels were never in flight at once", ev.Channel, e.hold))
				}
			}
			api.ServeHTTP(w, r)
			e.mu.Lock()
			e.inFlight[ev.Channel]--
			e.mu.Unlock()
		})
	}
}

// byChannel returns the recorded events of each channel in the order they arrived, and the
// errors seen.
func (e *eventRecorder) byChannel() (map[string][]postedEvent, []error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string][]postedEvent{}
	for _, ev := range e.events {
		m[ev.channel] = append(m[ev.channel], ev)
	}
	return m, slices.Clone(e.errs)
}

// TestMultichannelPerChannel: with --publish-per-channel every channel has its own publisher,
// all of them in flight at once (the API holds each channel's first request until every
// channel's has arrived), each sending its channel's burst one event a request, never two of
// a channel at once, in seq order, each round's events scheduled interval after the last's.
// The subscribers get every event in order, and the report gives each request's latency,
// which the API's delay bounds from below.
func TestMultichannelPerChannel(t *testing.T) {
	const channels, burst, rounds = 4, 3, 3
	const delay = 20 * time.Millisecond
	interval := 200 * time.Millisecond
	rec := newEventRecorder(channels)
	target := startHerald(t, func(api http.Handler) http.Handler { return rec.wrap(0)(slowAPI(delay)(api)) })
	rep, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Subs: 8, Channels: channels, Burst: burst,
		Rounds: rounds, Interval: interval, Wait: patience, PerChannel: true})
	if err != nil {
		t.Fatal(err)
	}
	got, errs := rec.byChannel()
	if len(errs) > 0 {
		t.Fatalf("the API saw: %v", errs)
	}
	if len(got) != channels {
		t.Fatalf("requests to %d channels; want %d", len(got), channels)
	}
	var round0 int64 // the first round's scheduled time, the same on every channel
	for ch, evs := range got {
		if len(evs) != burst*rounds {
			t.Fatalf("%s: %d requests; want %d", ch, len(evs), burst*rounds)
		}
		for i, ev := range evs {
			if ev.seq != i+1 || ev.inFlight != 1 {
				t.Errorf("%s: request %d is seq %d with %d of the channel in flight; want seq %d, alone", ch, i+1, ev.seq, ev.inFlight, i+1)
			}
			if i == 0 && round0 == 0 {
				round0 = ev.sched
			}
			// Every event of round r is scheduled for the run's start + r × interval.
			if want := round0 + int64(i/burst)*interval.Nanoseconds(); ev.sched != want {
				t.Errorf("%s: seq %d scheduled %v after the first round; want %v", ch, ev.seq,
					time.Duration(ev.sched-round0), time.Duration(want-round0))
			}
			if ev.arrivedNs < ev.sched {
				t.Errorf("%s: seq %d arrived before its schedule", ch, ev.seq)
			}
		}
	}
	if d := rep.Delivery; d.Expected != 8*burst*rounds || d.Delivered != d.Expected || !d.Complete || !d.Clean() {
		t.Fatalf("delivery %+v; want 8 subscribers × %d events, all in order", d, burst*rounds)
	}
	if rep.Publish != "per-channel" || rep.Publishers != channels {
		t.Errorf("publish %q with %d publishers; want per-channel with %d", rep.Publish, rep.Publishers, channels)
	}
	if l := rep.PublishLatency; l.Count != channels*burst*rounds || l.MinMs < float64(delay.Milliseconds()) || l.P99Ms < l.P50Ms {
		t.Errorf("publish latency %+v; want %d requests of at least %v", l, channels*burst*rounds, delay)
	}
	for _, rr := range rep.PerRound {
		// Each channel's burst is burst requests one after the other, each at least delay.
		if want := float64((burst * delay).Milliseconds()); rr.PublishMs < want || rr.CompletionMs <= 0 {
			t.Errorf("round %d: publish %.1f ms, completion %.1f ms; want at least %.0f ms and a completion", rr.Round, rr.PublishMs, rr.CompletionMs, want)
		}
	}
	checkText(t, rep, "per-channel: 4 publishers", "publish request latency", "requests ", "72 of 72 (100.00%)")
	checkJSON(t, rep, "publish_latency")
	checkJSON(t, rep, "publish")
}

// TestMultichannelPerChannelSpread: with --spread-publishes over two nodes, channel c's
// publisher posts to node c mod 2 only, and the events reach the subscribers of both nodes.
func TestMultichannelPerChannelSpread(t *testing.T) {
	const channels, burst, rounds = 4, 2, 2
	rec := newEventRecorder(0)
	bus := memory.NewBus()
	a, _ := startNode(t, session.Config{MaxConnections: 1000}, rec.wrap(0), bus, "a")
	b, _ := startNode(t, session.Config{MaxConnections: 1000}, rec.wrap(1), bus, "b")
	target := a
	target.WS = a.WS + "," + b.WS
	target.ServerPIDs = []int{os.Getpid(), os.Getpid()}
	rep, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Subs: 8, Channels: channels, Burst: burst,
		Rounds: rounds, Interval: 100 * time.Millisecond, Wait: patience, PerChannel: true, Spread: true})
	if err != nil {
		t.Fatal(err)
	}
	got, errs := rec.byChannel()
	if len(errs) > 0 {
		t.Fatalf("the APIs saw: %v", errs)
	}
	for c := range channels {
		evs := got[fmt.Sprintf("multi-%d", c)]
		if len(evs) != burst*rounds {
			t.Fatalf("multi-%d: %d requests; want %d", c, len(evs), burst*rounds)
		}
		for _, ev := range evs {
			if ev.node != int64(c%2) {
				t.Errorf("multi-%d: seq %d posted to node %d; want node %d", c, ev.seq, ev.node, c%2)
			}
		}
	}
	if d := rep.Delivery; d.Expected != 8*burst*rounds || d.Delivered != d.Expected || !d.Complete || !d.Clean() {
		t.Fatalf("delivery %+v; want 8 subscribers × %d events, all in order", d, burst*rounds)
	}
	if want := a.REST + ", " + b.REST; rep.Server.REST != want {
		t.Errorf("report says publishes went to %q; want %q", rep.Server.REST, want)
	}
	checkText(t, rep, "publishing to "+a.REST+", "+b.REST)
}

// TestMultichannelPublishFlags: the publish patterns' flags are checked before any connection,
// each error naming the flags at fault.
func TestMultichannelPublishFlags(t *testing.T) {
	for _, c := range []struct {
		cfg  MultichannelConfig
		want string // "" for a valid configuration
	}{
		{MultichannelConfig{PerChannel: true}, ""},
		{MultichannelConfig{PerChannel: true, Spread: true}, ""}, // one node: every publish to --rest
		{MultichannelConfig{Batch: true, Publishers: 8}, ""},
		{MultichannelConfig{PerChannel: true, Batch: true}, "--publish-per-channel and --batch exclude each other"},
		{MultichannelConfig{PerChannel: true, Publishers: 2}, "--publishers must be from 1 to 256, and more than 1 only with --batch"},
		{MultichannelConfig{PerChannel: true, Channels: maxPerChannel + 1}, "--publish-per-channel: --channels must be at most 256"},
		{MultichannelConfig{Channels: maxPerChannel + 1}, ""}, // one request names them all
		{MultichannelConfig{Spread: true}, "--spread-publishes needs --publish-per-channel"},
		{MultichannelConfig{Batch: true, Spread: true}, "--spread-publishes needs --publish-per-channel"},
		{MultichannelConfig{PerChannel: true, Spread: true, Target: Target{Publish: "kafka://127.0.0.1:9092/t"}}, "--spread-publishes: with --publish"},
	} {
		err := c.cfg.withDefaults().check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v; want it accepted", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: err = %v; want %q", c.cfg, err, c.want)
		}
	}
}
