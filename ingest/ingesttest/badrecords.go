package ingesttest

import (
	"fmt"
	"testing"

	"github.com/herald-rt/herald/ingest"
)

// testBadRecords: bad records are skipped, counted by reason, dead-lettered in order where
// the source writes dead letters, and committed like the rest.
func testBadRecords(t *testing.T, ns NewSource) {
	h := ns(t)
	dead := h.Caps.Has(DeadLetters)
	sink := &Sink{}
	s := h.start(t, sink, Options{DeadLetter: dead})
	if !h.Caps.Has(Replay) {
		warmUp(t, h, sink)
	}
	bad := []string{`{not json`, `{"seq":2}`, rec("bad channel!", 3)}
	h.Produce(t, 0, rec("a", 1), bad[0], bad[1], bad[2], rec("a", 4))
	got := waitEvents(t, sink, "a", 2)
	if len(got) != 2 || got[0].Data != "1" || got[1].Data != "4" {
		t.Fatalf("events %+v; want the two good records, 1 then 4", got)
	}
	want := []ingest.Reason{ingest.ReasonInvalidJSON, ingest.ReasonMissingField, ingest.ReasonInvalidChannel}
	waitFor(t, "three bad records counted", func() (bool, string) {
		var w [len(ingest.Stats{}.Bad)]uint64
		for _, r := range want {
			w[r] = 1
		}
		b := s.Stats().Bad
		return b == w, fmt.Sprint(b)
	})
	if !dead {
		if st := s.Stats(); st.DeadLettered != 0 {
			t.Errorf("%d dead letters without a dead-letter topic", st.DeadLettered)
		}
	} else {
		waitFor(t, "three dead letters", func() (bool, string) {
			st := s.Stats()
			return st.DeadLettered == 3, fmt.Sprintf("%d dead letters, %d failed", st.DeadLettered, st.DeadLetterErrors)
		})
		letters := h.DeadLetters(t, 3)
		if len(letters) != 3 {
			t.Fatalf("%d dead letters, want 3: %+v", len(letters), letters)
		}
		seen := map[string]bool{}
		for i, d := range letters {
			if d.Reason != want[i].String() || d.Value != bad[i] || d.Topic != h.Topic {
				t.Errorf("dead letter %d: %+v; want reason %s, value %s, topic %s", i, d, want[i], bad[i], h.Topic)
			}
			if h.Caps.Has(Replay) && (d.Position == "" || seen[d.Position]) {
				t.Errorf("dead letter %d: position %q, want the record's own", i, d.Position)
			}
			seen[d.Position] = true
		}
		if st := s.Stats(); st.DeadLetterErrors != 0 {
			t.Errorf("%d dead letters failed", st.DeadLetterErrors)
		}
	}
	if !h.Caps.Has(AtLeastOnce | Replay) {
		return
	}
	// All five were committed: the next source of the group starts after them.
	Stop(t, s)
	h.Produce(t, 0, rec("a", 5))
	sink2 := &Sink{}
	s2 := h.start(t, sink2, Options{})
	waitEvents(t, sink2, "a", 1)
	if got, c := sink2.Events(), s2.Stats().Consumed; len(got) != 1 || got[0].Data != "5" || c != 1 {
		t.Fatalf("after a restart: events %+v, consumed %d; want only the new record", got, c)
	}
}
