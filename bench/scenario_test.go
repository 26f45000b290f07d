package bench

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func checkText(t *testing.T, rep interface{ WriteText(io.Writer) error }, wants ...string) {
	t.Helper()
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

func TestMultichannel(t *testing.T) {
	target := startHerald(t, nil)
	target.Timeline = NewTimeline()
	target.Timeline.Start()
	rep, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Subs: 50, Channels: 5, Burst: 3, Rounds: 2, Interval: 100 * time.Millisecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Delivery; d.Expected != 300 || d.Delivered != 300 || d.Received != 300 || !d.Complete || !d.Clean() {
		t.Fatalf("delivery %+v; want 50 subscribers × 6 events, all in order", d)
	}
	for _, r := range rep.PerRound {
		if r.Latency.Count != 150 || r.PublishMs <= 0 {
			t.Errorf("round %d: %+v; want 150 latencies and a publish time", r.Round, r)
		}
	}
	if rep.DeliveriesPerSec <= 0 || rep.SlowConsumers != 0 || rep.Lost.Count != 0 || rep.Latency.Count != 300 {
		t.Fatalf("deliveries/s %v, slow consumers %d, lost %+v, latency %+v", rep.DeliveriesPerSec, rep.SlowConsumers, rep.Lost, rep.Latency)
	}
	if len(rep.Timeline) == 0 || rep.Timeline[len(rep.Timeline)-1].Attempts != 50 {
		t.Fatalf("timeline %+v; want points ending with 50 attempts", rep.Timeline)
	}
	var delivered int64
	for _, p := range rep.Timeline {
		delivered += p.Delivered
	}
	if delivered != 300 {
		t.Fatalf("timeline counts %d deliveries; want 300", delivered)
	}
	checkText(t, rep, "300 of 300 (100.00%)", "round 2", "deliveries/s", "slow consumers 0")
	checkJSON(t, rep, "deliveries_per_sec")
}

func TestRamp(t *testing.T) {
	target := startHerald(t, nil)
	target.Rate = 200
	// How many events each subscription expects depends on how fast the machine is; that every
	// expected event arrives, in order, does not.
	rep, err := Ramp(t.Context(), RampConfig{Target: target, Conns: 50, EventEvery: 100 * time.Millisecond,
		Hold: 2 * time.Second, Every: 100 * time.Millisecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.Established != 50 || rep.PeakActive != 50 || rep.Lost.Count != 0 {
		t.Fatalf("setup %+v, peak %d, lost %+v; want all 50 up", rep.Setup, rep.PeakActive, rep.Lost)
	}
	if n := len(rep.Rows); n < 3 || rep.Rows[n-1].Active != 50 || rep.Rows[n-1].Attempts != 50 || rep.Rows[n-1].ServerRSSBytes <= 0 {
		t.Fatalf("rows %+v; want several, ending with 50 active", rep.Rows)
	}
	if d := rep.Delivery; d.Expected == 0 || d.Delivered != d.Expected || !d.Complete || !d.Clean() {
		t.Fatalf("delivery %+v; want every event published after a subscription delivered to it, in order", d)
	}
	if rep.Published == 0 || rep.PublishFailures != 0 || rep.DeliveredPerSec <= 0 || rep.ServerRSS == nil || rep.Latency.Count == 0 {
		t.Fatalf("published %d (%d failed), delivered/s %v, server RSS %+v", rep.Published, rep.PublishFailures, rep.DeliveredPerSec, rep.ServerRSS)
	}
	checkText(t, rep, "peak         50 active", "BTC.trade", "success")
	checkJSON(t, rep, "peak_active_at_99")
}

// TestRampRefusedFailsFast: the REST API answers but every WebSocket connection is refused.
func TestRampRefusedFailsFast(t *testing.T) {
	target := startHerald(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target.WS = "ws://" + ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Ramp(t.Context(), RampConfig{Target: target, Conns: 200, Hold: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "none succeeded") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("err = %v; want the connect phase to give up", err)
	}
	if d := time.Since(start); d > patience {
		t.Fatalf("took %v to fail; want well under the minute it would hold", d)
	}
}

func TestChurn(t *testing.T) {
	target := startHerald(t, nil)
	target.Rate = 100
	target.Timeline = NewTimeline()
	target.Timeline.Start()
	// Cycles start on a schedule (100 in the second, however late), so their number does not
	// depend on the machine's speed; how many events the publisher fits in does.
	rep, err := Churn(t.Context(), ChurnConfig{Target: target, Steady: 20, Duration: time.Second, EventRate: 20, Wait: patience, Settle: patience})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cycles
	if c.Completed < 95 || c.Failed != 0 || c.Clean+c.Dropped != c.Completed || c.Clean == 0 || c.Dropped == 0 || c.CloseUnanswered != 0 {
		t.Fatalf("cycles %+v; want about 100, none failed, half clean (all answered), half reset", c)
	}
	if d := rep.Delivery; d.Expected != 20*int64(rep.Published) || d.Delivered != d.Expected || !d.Complete || !d.Clean() || rep.Published == 0 {
		t.Fatalf("delivery %+v of %d published; want every steady subscriber to get every event", d, rep.Published)
	}
	s := rep.ServerState
	if s == nil || !s.Returned || s.After == nil || s.Before.Connections != 0 || !strings.HasSuffix(s.Source, "/health") {
		t.Fatalf("server state %+v; want back to baseline, from /health", s)
	}
	if pts := rep.Timeline; len(pts) == 0 || pts[len(pts)-1].Attempts < 115 || pts[len(pts)-1].Connections != 0 {
		t.Fatalf("timeline %+v; want 20 + ~100 attempts and 0 connections at the end", pts)
	}
	checkText(t, rep, "back to baseline", "reset")
	checkJSON(t, rep, "close_unanswered")
}

// TestChurnReportsNoReturn: a server whose count of connections never comes back.
func TestChurnReportsNoReturn(t *testing.T) {
	var n atomic.Int64
	target := startHerald(t, func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				io.WriteString(w, `{"status":"ok","connections":{"current":`+strings.Repeat("1", int(min(n.Add(1), 15)))+`,"max":1},"channels":0}`)
				return
			}
			api.ServeHTTP(w, r)
		})
	})
	rep, err := Churn(t.Context(), ChurnConfig{Target: target, Steady: 2, Duration: 200 * time.Millisecond, Wait: patience, Settle: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.ServerState; s == nil || s.Returned || s.After == nil || s.Seconds < 0.3 {
		t.Fatalf("server state %+v; want not back after 0.3 s", s)
	}
	checkText(t, rep, "NOT back to baseline")
}

func TestPublish(t *testing.T) {
	for _, batch := range []int{0, 5} {
		target := startHerald(t, nil)
		rep, err := Publish(t.Context(), PublishConfig{Target: target, Publishers: 4, Channels: 8, Duration: 300 * time.Millisecond, Batch: batch, Wait: patience})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Requests == 0 || rep.FailedRequests != 0 || rep.Accepted != rep.Requests*int64(max(batch, 1)) || rep.AcceptedPerSec <= 0 {
			t.Fatalf("batch %d: %d requests, %d failed (%s), %d accepted", batch, rep.Requests, rep.FailedRequests, rep.FirstError, rep.Accepted)
		}
		if d := rep.Delivery; d.Expected != rep.Accepted || d.Delivered != d.Expected || !d.Complete || !d.Clean() {
			t.Fatalf("batch %d: delivery %+v; want all %d accepted events delivered in order", batch, d, rep.Accepted)
		}
		if rep.PublishLatency.Count != rep.Requests || rep.Latency.Count != rep.Accepted {
			t.Fatalf("batch %d: %d request latencies, %d delivery latencies", batch, rep.PublishLatency.Count, rep.Latency.Count)
		}
		checkText(t, rep, "events accepted", "request")
		checkJSON(t, rep, "accepted_per_sec")
	}
}

// TestPublishRejected: a wrong secret makes the publish scenario fail with the server's answer.
// Every publisher makes one request at least, so the answer is seen however short the run and
// however busy the machine.
func TestPublishRejected(t *testing.T) {
	target := startHerald(t, nil)
	target.Secret = "wrong"
	rep, err := Publish(t.Context(), PublishConfig{Target: target, Publishers: 2, Channels: 2, Duration: time.Nanosecond})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v; want a 401", err)
	}
	if rep.Requests < 2 || rep.FailedRequests != rep.Requests || rep.Accepted != 0 {
		t.Fatalf("%d requests, %d failed, %d accepted; want one at least per publisher, all refused", rep.Requests, rep.FailedRequests, rep.Accepted)
	}
}

// TestPublishShortestRun: a duration too short for any request to start still measures one
// request per publisher and its deliveries.
func TestPublishShortestRun(t *testing.T) {
	target := startHerald(t, nil)
	rep, err := Publish(t.Context(), PublishConfig{Target: target, Publishers: 3, Channels: 3, Duration: time.Nanosecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests < 3 || rep.FailedRequests != 0 || rep.Delivery.Delivered != rep.Accepted || !rep.Delivery.Complete {
		t.Fatalf("%d requests (%d failed), delivery %+v; want one at least per publisher, all delivered", rep.Requests, rep.FailedRequests, rep.Delivery)
	}
}

// swallowEvents answers every publish 200 without publishing it: a server that accepts events
// and delivers none.
func swallowEvents(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			io.WriteString(w, "{}")
			return
		}
		api.ServeHTTP(w, r)
	})
}

// TestNothingDeliveredFails: a run whose every publish was accepted but none delivered fails
// as having measured nothing, in every scenario that publishes. Waiting proves nothing came,
// so the waits are short: nothing ever will.
func TestNothingDeliveredFails(t *testing.T) {
	target := startHerald(t, swallowEvents)
	wait := 100 * time.Millisecond
	for name, run := range map[string]func() error{
		"publish": func() error {
			_, err := Publish(t.Context(), PublishConfig{Target: target, Publishers: 2, Channels: 2, Duration: time.Nanosecond, Wait: wait})
			return err
		},
		"fanout": func() error {
			_, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 3, Events: 1, Wait: wait})
			return err
		},
		"multichannel": func() error {
			_, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Subs: 3, Channels: 3, Burst: 1, Rounds: 1, Wait: wait})
			return err
		},
		"ramp": func() error {
			_, err := Ramp(t.Context(), RampConfig{Target: target, Conns: 3, EventEvery: 10 * time.Millisecond, Hold: 100 * time.Millisecond, Wait: wait})
			return err
		},
		"churn": func() error {
			_, err := Churn(t.Context(), ChurnConfig{Target: target, Steady: 2, Duration: time.Nanosecond, Wait: wait, Settle: wait})
			return err
		},
	} {
		if err := run(); !errors.Is(err, ErrNothingMeasured) || !strings.Contains(err.Error(), "expected deliveries arrived") {
			t.Errorf("%s: err = %v; want %v: none of the expected deliveries arrived", name, err, ErrNothingMeasured)
		}
	}
}

// TestMultichannelBatchPublishers: bursts as batch_events from several publishers at once
// still reach every subscriber, each channel's events in order.
func TestMultichannelBatchPublishers(t *testing.T) {
	target := startHerald(t, nil)
	rep, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Subs: 40, Channels: 8, Burst: 5, Rounds: 3,
		Interval: 100 * time.Millisecond, Wait: patience, Batch: true, Publishers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Delivery; d.Expected != 600 || d.Delivered != 600 || !d.Complete || !d.Clean() {
		t.Fatalf("delivery %+v; want 40 subscribers × 15 events, all in order", d)
	}
	if _, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Publishers: 2}); err == nil {
		t.Fatal("--publishers 2 without --batch accepted")
	}
}
