package ingesttest

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/internal/poll"
)

// start builds a source of h into pub with o, starts it and closes it on cleanup.
func (h *Harness) start(t *testing.T, pub ingest.Publisher, o Options) ingest.Source {
	t.Helper()
	s := h.New(t, h.pipeline(t, pub), o)
	s.Start()
	t.Cleanup(func() { Stop(t, s) })
	return s
}

// waitFor polls cond until it holds, failing t after Wait; cond describes what it saw.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, Wait, what, cond)
}

// waitState waits until s reports state want.
func waitState(t *testing.T, s ingest.Source, want ingest.State) {
	t.Helper()
	waitFor(t, "the source "+string(want), func() (bool, string) {
		st := s.Stats()
		return st.State == want, fmt.Sprintf("state %s (error %q)", st.State, st.Error)
	})
}

// waitEvents waits until sink holds at least n distinct events on ch and returns ch's events.
func waitEvents(t *testing.T, sink *Sink, ch string, n int) []herald.Event {
	t.Helper()
	var got []herald.Event
	waitFor(t, fmt.Sprintf("%d events on %s", n, ch), func() (bool, string) {
		got = on(sink.Events(), ch)
		d := len(Dedupe(got))
		return d >= n, fmt.Sprintf("%d (%d distinct)", len(got), d)
	})
	return got
}

// warmups numbers the records of warmUp: unique across cases.
var warmups atomic.Int64

// warmUp returns once s (into sink, which must take events) consumes: it writes a record for
// the channel "warmup" and waits for its event. A source without Replay may not have
// subscribed yet when the first is written, so it is written again until one arrives.
func warmUp(t *testing.T, h *Harness, sink *Sink) {
	t.Helper()
	had := len(on(sink.Events(), "warmup"))
	write := func() { h.Produce(t, 0, rec("warmup", int(warmups.Add(1)))) }
	write()
	waitFor(t, "the source to consume (a warm-up record delivered)", func() (bool, string) {
		if n := len(on(sink.Events(), "warmup")); n > had {
			return true, ""
		}
		if !h.Caps.Has(Replay) {
			write()
		}
		return false, "no warm-up event"
	})
}

// waitGoroutines waits until no more goroutines run than n: a closed source leaves none.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "the closed sources' goroutines gone", func() (bool, string) {
		g := runtime.NumGoroutine()
		return g <= n, fmt.Sprintf("%d goroutines, %d before", g, n)
	})
}
