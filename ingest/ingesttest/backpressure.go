package ingesttest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/herald-rt/herald/ingest"
)

// testBackpressure: while the publisher refuses, the source retries, reports paused and
// takes no more than one fetch; once it takes events again, each record arrives once, in
// order, and the source is up.
func testBackpressure(t *testing.T, ns NewSource) {
	h := ns(t)
	const batch, n = 20, 50
	sink := &Sink{}
	s := h.start(t, sink, Options{Batch: batch})
	warmUp(t, h, sink)
	before := s.Stats()
	sink.SetRefuse(true)
	h.Produce(t, 0, recs("a", 0, n)...)
	waitState(t, s, ingest.StatePaused)
	waitFor(t, "three retries", func() (bool, string) {
		r := s.Stats().PublishRetries - before.PublishRetries
		return r >= 3, fmt.Sprintf("%d retries", r)
	})
	st := s.Stats()
	if c := st.Consumed - before.Consumed; c > batch {
		t.Errorf("%d records taken while the publisher refused, want at most one fetch (%d)", c, batch)
	}
	if st.Published != before.Published || len(on(sink.Events(), "a")) != 0 {
		t.Fatalf("published %d while refused", st.Published-before.Published)
	}
	sink.SetRefuse(false)
	got := waitEvents(t, sink, "a", n)
	if c := CheckOrder(t, got)["a"]; c != n {
		t.Errorf("%d events after the refusals, want %d (each record once)", c, n)
	}
	waitState(t, s, ingest.StateUp)
}

// testRefusedNotCommitted: records the publisher refused are not committed: a source closed
// while refused leaves every one of them to the next source of its group.
func testRefusedNotCommitted(t *testing.T, ns NewSource) {
	h := ns(t)
	h.need(t, AtLeastOnce|Replay, "what the publisher refused is left to the next source")
	const batch, n = 20, 50
	h.Produce(t, 0, recs("a", 0, n)...)
	goroutines := runtime.NumGoroutine()
	sink := Refusing()
	s := h.start(t, sink, Options{Batch: batch})
	waitState(t, s, ingest.StatePaused)
	waitFor(t, "three retries", func() (bool, string) {
		r := s.Stats().PublishRetries
		return r >= 3, fmt.Sprintf("%d retries", r)
	})
	if c := s.Stats().Consumed; c > batch {
		t.Errorf("%d records taken while the publisher refused, want at most one fetch (%d)", c, batch)
	}
	Stop(t, s)
	if len(sink.Events()) != 0 || s.Stats().Published != 0 {
		t.Fatalf("published %d while refused", s.Stats().Published)
	}
	waitGoroutines(t, goroutines)

	sink2 := &Sink{}
	h.start(t, sink2, Options{})
	got := waitEvents(t, sink2, "a", n)
	if c := CheckOrder(t, got)["a"]; c != n {
		t.Errorf("the next source got %d events, want %d (each record once)", c, n)
	}
}
