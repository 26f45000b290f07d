package bench

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowAPI is herald's REST API answering every publish only after delay, as a server whose
// API is slow under load does: the generator's publisher, which sends a burst's requests one
// after the other, is throttled by it.
func slowAPI(delay time.Duration) func(http.Handler) http.Handler {
	return func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") {
				time.Sleep(delay) // the slow server itself, not a wait in the test
			}
			api.ServeHTTP(w, r)
		})
	}
}

// TestMultichannelLatencyFromSchedule: behind a REST API that takes 200 ms per publish, a
// burst of 4 events takes 800 ms to publish, so rounds meant to start 50 ms apart start late
// and each event of a burst waits for the ones before it. The latency from each event's send
// time stays near 200 ms (each stamp is taken after the queue it waited in); the latency
// from the round's scheduled start, the round's start lag and its completion time show the
// queue. The bounds below follow from the delay alone (each request takes at least 200 ms,
// one after the other), never from how fast the machine is.
func TestMultichannelLatencyFromSchedule(t *testing.T) {
	const delay = 200 * time.Millisecond
	const burst, rounds = 4, 3
	interval := 50 * time.Millisecond
	target := startHerald(t, slowAPI(delay))
	rep, err := Multichannel(t.Context(), MultichannelConfig{Target: target, Subs: 4, Channels: 2, Burst: burst, Rounds: rounds,
		Interval: interval, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Delivery; d.Delivered != 4*burst*rounds || !d.Clean() {
		t.Fatalf("delivery %+v; want 4 subscribers × %d events, in order", d, burst*rounds)
	}
	msOf := func(d time.Duration) float64 { return float64(d.Milliseconds()) }
	// Event k (1-based) of round r (0-based) is sent after the r×burst + k − 1 requests before
	// it, each at least delay, and arrives at least delay after that; it was scheduled at
	// r × interval. Each latency from the schedule is at least the latency from the send
	// time plus that wait.
	lower := func(r, k int) float64 {
		return msOf(time.Duration(r*burst+k)*delay - time.Duration(r)*interval)
	}
	if got := rep.Latency.MinMs; got < msOf(delay) {
		t.Errorf("latency from the send time: min %.1f ms; want at least the API's %v", got, delay)
	}
	if got, want := rep.LatencyFromSchedule.MaxMs, lower(rounds-1, burst); got < want {
		t.Errorf("latency from the schedule: max %.1f ms; want at least %.0f ms (the last event waited for %d requests)", got, want, rounds*burst-1)
	}
	// Half the events waited for at least 5 requests before theirs (round 2's second and
	// every later one): the median from the schedule is at least lower(1, 2).
	if got, want := rep.LatencyFromSchedule.P50Ms, lower(1, 2); got < want {
		t.Errorf("latency from the schedule: p50 %.1f ms; want at least %.0f ms", got, want)
	}
	// What the send-time stamps hide: the median from the send time is the API's delay and
	// the delivery, far under the median from the schedule (here at least 1,150 ms; the
	// margin is the delivery of one event by a local server, several hundred ms even on a
	// busy machine).
	if rep.Latency.P50Ms >= rep.LatencyFromSchedule.P50Ms/2 {
		t.Errorf("p50 from the send time %.1f ms, from the schedule %.1f ms: the send-time stamps should hide the queue",
			rep.Latency.P50Ms, rep.LatencyFromSchedule.P50Ms)
	}
	for i, rr := range rep.PerRound {
		if rr.LatencyFromSchedule.Count != 4*burst || rr.Latency.Count != 4*burst {
			t.Errorf("round %d: %d latencies from the schedule and %d from the send time; want %d each", rr.Round,
				rr.LatencyFromSchedule.Count, rr.Latency.Count, 4*burst)
		}
		// The round's first publish waits for every request of the rounds before it.
		if want := lower(i, 0); rr.StartLagMs < want {
			t.Errorf("round %d: start lag %.1f ms; want at least %.0f ms", rr.Round, rr.StartLagMs, want)
		}
		if want := msOf(burst * delay); rr.CompletionMs < want || rr.PublishMs < want {
			t.Errorf("round %d: completion %.1f ms, publish %.1f ms; want both at least %.0f ms (%d requests of %v)",
				rr.Round, rr.CompletionMs, rr.PublishMs, want, burst, delay)
		}
		if rr.LatencyFromSchedule.MaxMs < lower(i, burst) {
			t.Errorf("round %d: max latency from the schedule %.1f ms; want at least %.0f ms", rr.Round, rr.LatencyFromSchedule.MaxMs, lower(i, burst))
		}
	}
	checkText(t, rep, "from the round's scheduled start", "round ms", "lag ms")
	checkJSON(t, rep, "latency_from_schedule")
	checkJSON(t, rep, "completion_ms")
	checkJSON(t, rep, "start_lag_ms")
	var page bytes.Buffer
	if err := WriteHTML(&page, HTMLReport{Report: rep}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-card="latency_from_schedule"`, ">completion_ms<", ">start_lag_ms<", ">latency_from_schedule<"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML report lacks %s", want)
		}
	}
}

// TestRampLatencyFromSchedule: the ramp's publisher is meant to send an event every 50 ms,
// but the API takes 150 ms per publish, so event n goes out at least (n−1) × 100 ms late.
func TestRampLatencyFromSchedule(t *testing.T) {
	const delay, every = 150 * time.Millisecond, 50 * time.Millisecond
	target := startHerald(t, slowAPI(delay))
	target.Rate = 200
	rep, err := Ramp(t.Context(), RampConfig{Target: target, Conns: 10, EventEvery: every, Hold: 1500 * time.Millisecond,
		Every: 500 * time.Millisecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Published < 3 || rep.Latency.Count == 0 || rep.LatencyFromSchedule.Count != rep.Latency.Count {
		t.Fatalf("published %d, %d latencies from the send time, %d from the schedule; want at least 3 events, every latency both ways",
			rep.Published, rep.Latency.Count, rep.LatencyFromSchedule.Count)
	}
	// Every subscriber joined before the hold, so each got the last event: it was sent after
	// the Published − 1 requests before it and arrived at least delay later.
	want := float64((time.Duration(rep.Published-1)*(delay-every) + delay).Milliseconds())
	if got := rep.LatencyFromSchedule.MaxMs; got < want {
		t.Errorf("latency from the schedule: max %.1f ms; want at least %.0f ms over %d events", got, want, rep.Published)
	}
	if rep.Latency.MinMs < float64(delay.Milliseconds()) {
		t.Errorf("latency from the send time: min %.1f ms; want at least %v", rep.Latency.MinMs, delay)
	}
	checkText(t, rep, "from sched.", "from send")
	b, _ := json.Marshal(rep)
	if !bytes.Contains(b, []byte(`"latency_from_schedule":{"count":`)) {
		t.Errorf("JSON report lacks latency_from_schedule: %s", b)
	}
}
