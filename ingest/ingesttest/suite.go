package ingesttest

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/herald-rt/herald/ingest"
)

// Run runs every case of the ingest.Source contract against sources built by the harnesses
// newSource returns. A case that needs a capability the source lacks is skipped, naming it;
// the outage cases run last, and only when the harness can stop and start its broker.
func Run(t *testing.T, newSource NewSource) {
	cases := []struct {
		name string
		fn   func(*testing.T, NewSource)
	}{
		{"States", testStates},
		{"Order", testOrder},
		{"Resume", testResume},
		{"Backpressure", testBackpressure},
		{"RefusedNotCommitted", testRefusedNotCommitted},
		{"BadRecords", testBadRecords},
		{"Close", testClose},
		{"UnreachableAtStart", testUnreachableAtStart},
		{"BrokerRestart", testBrokerRestart},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newSource) })
	}
}

// testStates: a source is starting until Start, up once it consumes, stopped after Close;
// Stats names it, and a second Start does nothing.
func testStates(t *testing.T, ns NewSource) {
	h := ns(t)
	sink := &Sink{}
	s := h.New(t, h.pipeline(t, sink), Options{})
	t.Cleanup(func() { Stop(t, s) })
	if st := s.Stats(); st.State != ingest.StateStarting || st.Name != "t" || st.Kind != h.Kind || st.Consumed != 0 || st.Up() {
		t.Fatalf("before Start: %+v; want state starting (not up), name t, kind %s, nothing consumed", st, h.Kind)
	}
	s.Start()
	s.Start()
	waitState(t, s, ingest.StateUp)
	warmUp(t, h, sink)
	h.Produce(t, 0, rec("a", 1))
	waitEvents(t, sink, "a", 1)
	Stop(t, s)
	if st := s.Stats(); st.State != ingest.StateStopped || st.Up() {
		t.Fatalf("after Close: state %s; want stopped", st.State)
	}
	if got := on(sink.Events(), "a"); len(got) != 1 {
		t.Fatalf("%d events of one record, started twice; want 1", len(got))
	}
}

// testOrder: the records of every partition reach the publisher in order, each once; Stats
// counts them, and the lag of each partition falls to 0.
func testOrder(t *testing.T, ns NewSource) {
	h := ns(t)
	const per = 200
	sink := &Sink{}
	write := func() {
		for p := range h.Partitions {
			h.Produce(t, p, recs("p"+strconv.Itoa(p), 0, per)...)
		}
	}
	var s ingest.Source
	if h.Caps.Has(Replay) {
		write() // a backlog, before the source starts
		s = h.start(t, sink, Options{})
	} else {
		s = h.start(t, sink, Options{})
		warmUp(t, h, sink)
		write()
	}
	for p := range h.Partitions {
		ch := "p" + strconv.Itoa(p)
		got := waitEvents(t, sink, ch, per)
		if n := CheckOrder(t, got)[ch]; n != per {
			t.Errorf("partition %d: %d events, want %d (each record once)", p, n, per)
		}
	}
	waitFor(t, "Stats to count every record", func() (bool, string) {
		st, n := s.Stats(), uint64(len(sink.Events()))
		return st.Consumed == n && st.Published == n, fmt.Sprintf("consumed %d, published %d; the publisher has %d", st.Consumed, st.Published, n)
	})
	if st := s.Stats(); st.State != ingest.StateUp || st.CommitErrors != 0 || st.PublishRetries != 0 || st.Bad != [len(st.Bad)]uint64{} {
		t.Errorf("stats %+v; want up, no commit errors, no retries, no bad records", st)
	}
	if !h.Caps.Has(Lag) {
		return
	}
	waitFor(t, fmt.Sprintf("lag 0 on %d partitions", h.Partitions), func() (bool, string) {
		lag := s.Stats().Lag
		if len(lag) != h.Partitions {
			return false, fmt.Sprint(lag)
		}
		for _, l := range lag {
			if l.Records != 0 || l.Topic != h.Topic {
				return false, fmt.Sprint(lag)
			}
		}
		return true, ""
	})
}

// testResume: a source closed after consuming commits what it handed on; the next source of
// its group begins after it, with only the records written since.
func testResume(t *testing.T, ns NewSource) {
	h := ns(t)
	h.need(t, AtLeastOnce|Replay, "a source started later resumes where the last one committed")
	const per = 20
	last := "p" + strconv.Itoa(h.Partitions-1)
	sink := &Sink{}
	s := h.start(t, sink, Options{})
	for p := range h.Partitions {
		h.Produce(t, p, recs("p"+strconv.Itoa(p), 0, per)...)
	}
	for p := range h.Partitions {
		waitEvents(t, sink, "p"+strconv.Itoa(p), per)
	}
	Stop(t, s)

	h.Produce(t, h.Partitions-1, recs(last, per, per+2)...)
	sink2 := &Sink{}
	s2 := h.start(t, sink2, Options{})
	waitEvents(t, sink2, last, 2)
	// A marker: once it is in, nothing older is coming on its partition.
	marker := per
	if h.Partitions == 1 {
		marker = per + 2
	}
	h.Produce(t, 0, rec("p0", marker))
	waitFor(t, "the marker", func() (bool, string) { return len(sink2.Events()) >= 3, fmt.Sprint(sink2.Events()) })
	got := sink2.Events()
	for _, ev := range got {
		if seq, _ := strconv.Atoi(ev.Data); seq < per {
			t.Errorf("the next source of the group got %s %s, which the first handed on and committed", ev.Channel, ev.Data)
		}
	}
	if len(got) != 3 {
		t.Errorf("the next source got %d events, want the 3 records written since: %+v", len(got), got)
	}
	if c := s2.Stats().Consumed; c != 3 {
		t.Errorf("the next source consumed %d records, want 3", c)
	}
}
