package ingesttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/herald-rt/herald/ingest"
)

// testUnreachableAtStart: a source started while its broker is down reports down with the
// error, then consumes once the broker is up.
func testUnreachableAtStart(t *testing.T, ns NewSource) {
	h := ns(t)
	if h.Stop == nil || h.Start == nil {
		t.Skip("the harness cannot stop and start its broker")
	}
	h.Stop(t)
	sink := &Sink{}
	s := h.start(t, sink, Options{})
	waitFor(t, "the source down, with the error", func() (bool, string) {
		st := s.Stats()
		return st.State == ingest.StateDown && st.Error != "" && !st.Up(), fmt.Sprintf("state %s, error %q", st.State, st.Error)
	})
	h.Start(t)
	waitState(t, s, ingest.StateUp)
	if !h.Caps.Has(Replay) {
		warmUp(t, h, sink)
	}
	h.Produce(t, 0, rec("a", 0), rec("a", 1))
	got := waitEvents(t, sink, "a", 2)
	CheckOrder(t, Dedupe(got))
	waitState(t, s, ingest.StateUp)
}

// testBrokerRestart: the broker killed mid-run: the source reports down, reconnects once it
// is back and delivers every record written since, in order (the ones it had handed on
// perhaps again: at least once).
func testBrokerRestart(t *testing.T, ns NewSource) {
	h := ns(t)
	if h.Stop == nil || h.Start == nil {
		t.Skip("the harness cannot stop and start its broker")
	}
	sink := &Sink{}
	s := h.start(t, sink, Options{})
	if !h.Caps.Has(Replay) {
		warmUp(t, h, sink)
	}
	h.Produce(t, 0, rec("a", 0), rec("a", 1))
	waitEvents(t, sink, "a", 2)

	t0 := time.Now()
	h.Stop(t)
	waitState(t, s, ingest.StateDown)
	t.Logf("down after %v", time.Since(t0))
	h.Start(t)
	t.Logf("broker started again after %v", time.Since(t0))
	waitState(t, s, ingest.StateUp)
	t.Logf("up after %v", time.Since(t0))
	if !h.Caps.Has(Replay) {
		warmUp(t, h, sink)
	}
	h.Produce(t, 0, recs("a", 2, 30)...)
	got := waitEvents(t, sink, "a", 30)
	t.Logf("all delivered after %v", time.Since(t0))
	CheckOrder(t, Dedupe(got))
}
