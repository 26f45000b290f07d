package chaos

import (
	"strings"
	"testing"
	"time"
)

// logOf builds a subscriber's log of channel "c": each word is an entry, in order: "sub"
// (subscribed), "p1-3" (event 3 of p1, with the next offset as its position), "p1-3!" (the
// same event dropped as a replay), "ok" (recovered:true), "lost:too_old" (recovered:false
// with the reason); except "=f", which is no entry: the events after it are of epoch "f",
// from offset 1 (those before it of epoch "e"). Words are a second apart from 1s.
func logOf(words string) []Entry {
	var log []Entry
	epoch, offset := "e", int64(0)
	for i, w := range strings.Fields(words) {
		e := Entry{At: time.Duration(i+1) * time.Second, Channel: "c", Node: 1}
		switch {
		case strings.HasPrefix(w, "="):
			epoch, offset = strings.TrimPrefix(w, "="), 0
			continue
		case w == "sub":
			e.Kind = Subscribed
		case w == "ok":
			e.Kind, e.Asked, e.Recovered = Recovery, true, true
		case strings.HasPrefix(w, "lost:"):
			e.Kind, e.Asked, e.Reason = Recovery, true, strings.TrimPrefix(w, "lost:")
		default:
			e.Kind = Received
			w, e.Dropped = strings.CutSuffix(w, "!")
			pub, seq, _ := strings.Cut(w, "-")
			e.Publisher = pub
			for _, c := range seq {
				e.Seq = e.Seq*10 + int(c-'0')
			}
			offset++
			e.Pos = &Position{Epoch: epoch, Offset: offset}
		}
		log = append(log, e)
	}
	return log
}

// events are p1's events 1..n on channel c, each first sent at (its number + 1) seconds
// (after the subscription at 1s), acknowledged unless listed in unacked.
func events(n int, unacked ...int) []Published {
	var ps []Published
	for i := 1; i <= n; i++ {
		p := Published{Publisher: "p1", Seq: i, Channel: "c", Acked: true, Attempts: 1, First: time.Duration(i+1) * time.Second}
		for _, u := range unacked {
			if u == i {
				p.Acked = false
			}
		}
		ps = append(ps, p)
	}
	return ps
}

// sentAt gives every event the same first attempt's time.
func sentAt(at time.Duration, ps []Published) []Published {
	for i := range ps {
		ps[i].First = at
	}
	return ps
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []Published
		log    string
		want   ChannelReport // the counts compared
		failed bool
	}{
		{"every event once, in order", events(3), "sub p1-1 p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3}, false},
		{"an acknowledged event never delivered", events(3), "sub p1-1 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 2, Lost: 1}, true},
		{"the last event never delivered", events(3), "sub p1-1 p1-2",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 2, Lost: 1}, true},
		{"missed events that a recovered:false reported", sentAt(time.Second, events(4)), "sub p1-1 lost:too_old p1-4",
			ChannelReport{Acked: 4, Expected: 4, Delivered: 2, LostReported: map[string]int{"too_old": 2}, NotRecovered: map[string]int{"too_old": 1}}, false},
		{"a loss reported before an earlier event that came late", sentAt(time.Second, events(4)), "sub p1-1 lost:epoch_changed p1-2 p1-4",
			ChannelReport{Acked: 4, Expected: 4, Delivered: 3, LostReported: map[string]int{"epoch_changed": 1}, NotRecovered: map[string]int{"epoch_changed": 1}}, false},
		{"a recovered:false before the event was sent excuses nothing", events(6), "sub p1-1 lost:epoch_changed p1-2 p1-3 p1-4 p1-6",
			ChannelReport{Acked: 6, Expected: 6, Delivered: 5, Lost: 1, NotRecovered: map[string]int{"epoch_changed": 1}}, true},
		{"an acknowledged event delivered twice", events(3), "sub p1-1 p1-2 ok p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Duplicates: 1, Recovered: 1}, true},
		{"an event delivered again in a new epoch after an epoch_changed", events(3), "sub p1-1 p1-2 lost:epoch_changed =f p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, DupReported: 1, NotRecovered: map[string]int{"epoch_changed": 1}}, false},
		{"an event delivered again in the same epoch after an epoch_changed", events(3), "sub p1-1 p1-2 lost:epoch_changed p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Duplicates: 1, NotRecovered: map[string]int{"epoch_changed": 1}}, true},
		{"an event delivered again in a new epoch without a recovered:false", events(3), "sub p1-1 p1-2 ok =f p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Duplicates: 1, Recovered: 1}, true},
		{"an event delivered again in a new epoch after a recovered:false of another reason", events(3), "sub p1-1 p1-2 lost:too_old =f p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Duplicates: 1, NotRecovered: map[string]int{"too_old": 1}}, true},
		{"an epoch_changed before the first delivery, not between", events(3), "sub lost:epoch_changed p1-1 p1-2 =f p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Duplicates: 1, NotRecovered: map[string]int{"epoch_changed": 1}}, true},
		{"an epoch_changed after the second delivery, not between", events(3), "sub p1-1 p1-2 =f p1-2 lost:epoch_changed p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Duplicates: 1, NotRecovered: map[string]int{"epoch_changed": 1}}, true},
		{"a third delivery in the new epoch", events(3), "sub p1-1 p1-2 lost:epoch_changed =f p1-2 p1-2 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Duplicates: 1, DupReported: 1, NotRecovered: map[string]int{"epoch_changed": 1}}, true},
		{"an unacknowledged event delivered again in a new epoch after an epoch_changed", events(3, 2), "sub p1-1 p1-2 lost:epoch_changed =f p1-2 p1-3",
			ChannelReport{Acked: 2, Expected: 2, Delivered: 2, UnackedDelivered: 1, UnackedDuplicates: 1, NotRecovered: map[string]int{"epoch_changed": 1}}, true},
		{"an unacknowledged event delivered once", events(3, 2), "sub p1-1 p1-2 p1-3",
			ChannelReport{Acked: 2, Expected: 2, Delivered: 2, UnackedDelivered: 1}, false},
		{"an unacknowledged event delivered twice", events(3, 2), "sub p1-1 p1-2 p1-2 p1-3",
			ChannelReport{Acked: 2, Expected: 2, Delivered: 2, UnackedDelivered: 1, UnackedDuplicates: 1}, true},
		{"two events out of order", events(3), "sub p1-2 p1-1 p1-3",
			ChannelReport{Acked: 3, Expected: 3, Delivered: 3, Reorders: 1}, true},
		{"an event replayed at or below the position handled", events(2), "sub p1-1 p1-1! p1-2",
			ChannelReport{Acked: 2, Expected: 2, Delivered: 2, ReplayedDropped: 1}, true},
		{"warm-up events are not the run's", events(1), "sub warm-up-1 warm-up-1 p1-1",
			ChannelReport{Acked: 1, Expected: 1, Delivered: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check([]string{"c"}, tc.events, [][]Entry{logOf(tc.log)})[0]
			if got.Failed() != tc.failed {
				t.Errorf("Failed() = %v, want %v (findings %q)", got.Failed(), tc.failed, got.Findings)
			}
			w := tc.want
			if got.Acked != w.Acked || got.Expected != w.Expected || got.Delivered != w.Delivered || got.Lost != w.Lost ||
				got.Duplicates != w.Duplicates || got.DupReported != w.DupReported || got.UnackedDuplicates != w.UnackedDuplicates || got.UnackedDelivered != w.UnackedDelivered ||
				got.Reorders != w.Reorders || got.ReplayedDropped != w.ReplayedDropped || got.Recovered != w.Recovered ||
				counts(got.LostReported) != counts(w.LostReported) || counts(got.NotRecovered) != counts(w.NotRecovered) {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
			if tc.failed && len(got.Findings) == 0 {
				t.Error("a failure without a finding that describes it")
			}
			reported := 0
			for _, f := range got.Findings {
				if strings.Contains(f, "after a recovery answered recovered:false, epoch_changed") && strings.HasSuffix(f, ": reported, not a failure") {
					reported++
				}
			}
			if reported != got.DupReported {
				t.Errorf("%d findings say a duplicate was reported, want %d: %q", reported, got.DupReported, got.Findings)
			}
		})
	}
}

// An event sent before the subscriber first subscribed is not expected of it.
func TestCheckBeforeTheSubscription(t *testing.T) {
	evs := events(2)
	evs[0].First = 0
	got := check([]string{"c"}, evs, [][]Entry{logOf("sub p1-2")})[0]
	if got.Expected != 1 || got.Lost != 0 || got.Failed() {
		t.Errorf("got %+v, want 1 expected and nothing lost", got)
	}
}

func TestReportFailed(t *testing.T) {
	r := &Report{Channels: []ChannelReport{{Channel: "c"}}}
	if r.Failed() {
		t.Error("an empty report failed")
	}
	r.Problems = []string{"node-1 is not running at the end"}
	if !r.Failed() {
		t.Error("a run with a problem passed")
	}
	r = &Report{Totals: ChannelReport{Reorders: 1}}
	if !r.Failed() {
		t.Error("a run with a reorder passed")
	}
	var b strings.Builder
	r.Print(&b)
	if !strings.Contains(b.String(), "FAIL: 0 lost, 0 duplicates (0 of unacknowledged events), 1 reorders") {
		t.Errorf("the printed report does not say what failed:\n%s", b.String())
	}
}

// A duplicate that was reported fails no run, and the verdict says it came; beside a failure it
// is named apart from the duplicates counted.
func TestReportDupReported(t *testing.T) {
	r := &Report{Totals: ChannelReport{DupReported: 5}}
	var b strings.Builder
	r.Print(&b)
	if r.Failed() || !strings.Contains(b.String(), "PASS: no acknowledged event lost, no duplicate but 5 reported") {
		t.Errorf("failed %v, printed:\n%s", r.Failed(), b.String())
	}
	r.Totals.Duplicates = 1
	b.Reset()
	r.Print(&b)
	if !r.Failed() || !strings.Contains(b.String(), "FAIL: 0 lost, 1 duplicates (0 of unacknowledged events)") ||
		!strings.Contains(b.String(), "; 5 duplicates reported (epoch_changed), not failures") {
		t.Errorf("failed %v, printed:\n%s", r.Failed(), b.String())
	}
}

// A run's kept logs, checked again, give the run's findings.
func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	evs := events(3)
	logs := [][]Entry{logOf("sub p1-1 p1-3"), logOf("sub p1-1 p1-2 p1-2 p1-3")}
	if err := writeLogs(dir, evs, logs); err != nil {
		t.Fatal(err)
	}
	rep, err := CheckDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.Lost != 1 || rep.Totals.Duplicates != 1 || rep.Totals.Expected != 6 || !rep.Failed() {
		t.Errorf("got %+v, want 6 expected, 1 lost, 1 duplicate", rep.Totals)
	}
	if _, err := CheckDir(t.TempDir()); err == nil {
		t.Error("an empty directory checked")
	}
}

// A position given twice: the subscriber handled p1-2 at offset 2, then p1-3 came at offset 2
// too and was dropped as a replay. p1-3 is lost without a word, and counted as reused.
func TestCheckPositionGivenTwice(t *testing.T) {
	log := logOf("sub p1-1 p1-2 p1-3! p1-4")
	log[3].Pos.Offset, log[3].Was = 2, "p1-2"
	log[4].Pos.Offset = 3
	var c ChannelReport
	checkOne(&c, "s1", "c", events(4), log)
	if c.Reused != 1 || c.ReplayedDropped != 1 || c.Lost != 1 || !c.Failed() {
		t.Fatalf("reused %d, replayed %d, lost %d: want 1, 1, 1 (%v)", c.Reused, c.ReplayedDropped, c.Lost, c.Findings)
	}
	if !strings.Contains(strings.Join(c.Findings, "\n"), "where it had handled p1-2") {
		t.Fatalf("findings %v do not name the event handled at the position", c.Findings)
	}
}
