package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// ChannelReport is what the checker found on one channel, over every subscriber.
type ChannelReport struct {
	Channel    string   `json:"channel"`
	Publishers []string `json:"publishers,omitempty"`

	Published int `json:"published"` // events sent at least once
	Acked     int `json:"acked"`     // of which acknowledged
	Expected  int `json:"expected"`  // acknowledged events × subscribers that were subscribed before them
	Delivered int `json:"delivered"` // of the expected, those delivered

	// Lost: acknowledged events never delivered to a subscriber, with no recovered:false
	// between the events delivered around them. LostReported: those with one, by its reason.
	Lost         int            `json:"lost"`
	LostReported map[string]int `json:"lost_reported,omitempty"`
	// Duplicates: deliveries of an acknowledged event after its first (to one subscriber);
	// UnackedDuplicates the same for events never acknowledged. UnackedDelivered: events
	// never acknowledged but delivered (once), which a retry that timed out may leave.
	Duplicates int `json:"duplicates"`
	// DupReported: deliveries of an acknowledged event again in another epoch than its
	// delivery before, with a recovery answered recovered:false, epoch_changed, in between:
	// the subscriber was told its history was gone (a single node that restarted forgot the
	// event's idempotency key with it, and published a retry of it again). Not in Duplicates.
	DupReported       int `json:"dup_reported,omitempty"`
	UnackedDuplicates int `json:"unacked_duplicates"`
	UnackedDelivered  int `json:"unacked_delivered"`
	// Reorders: events delivered after a later event of the same publisher.
	Reorders int `json:"reorders"`
	// ReplayedDropped: events that came again with a position at or below the last one the
	// subscriber had handled (a replay of what it had), and that it dropped.
	ReplayedDropped int `json:"replayed_dropped"`
	// Reused: of those, events that came at a position where the subscriber had handled
	// another event: the position was given twice (the store went back, as after a power
	// cut), and the event, never handed on, is lost to the subscriber without a word.
	Reused int `json:"reused"`

	Recovered    int            `json:"recovered"`               // recoveries answered recovered:true
	NotRecovered map[string]int `json:"not_recovered,omitempty"` // answered recovered:false, by reason

	Findings []string `json:"findings,omitempty"` // the first few problems, described

	reportedFindings int // of the findings, those of DupReported
}

// maxFindings bounds the problems a channel's report describes one by one; of them, at most
// maxReportedFindings describe duplicates that were reported (DupReported), so that those
// leave room for the failures.
const (
	maxFindings         = 20
	maxReportedFindings = 5
)

// epochChanged is the reason of a recovery answered recovered:false because the channel's
// history is not the one the subscriber's position was in (cluster.ReasonEpochChanged).
const epochChanged = "epoch_changed"

// Failed reports whether the channel lost an acknowledged event silently, delivered one
// twice, reordered or replayed one.
func (c *ChannelReport) Failed() bool {
	return c.Lost > 0 || c.Duplicates > 0 || c.UnackedDuplicates > 0 || c.Reorders > 0 || c.ReplayedDropped > 0
}

func (c *ChannelReport) add(o *ChannelReport) {
	c.Published += o.Published
	c.Acked += o.Acked
	c.Expected += o.Expected
	c.Delivered += o.Delivered
	c.Lost += o.Lost
	c.Duplicates += o.Duplicates
	c.DupReported += o.DupReported
	c.UnackedDuplicates += o.UnackedDuplicates
	c.UnackedDelivered += o.UnackedDelivered
	c.Reorders += o.Reorders
	c.ReplayedDropped += o.ReplayedDropped
	c.Reused += o.Reused
	c.Recovered += o.Recovered
	c.LostReported = addCounts(c.LostReported, o.LostReported)
	c.NotRecovered = addCounts(c.NotRecovered, o.NotRecovered)
}

func addCounts(dst, src map[string]int) map[string]int {
	for k, v := range src {
		if dst == nil {
			dst = map[string]int{}
		}
		dst[k] += v
	}
	return dst
}

func (c *ChannelReport) find(format string, args ...any) {
	if len(c.Findings) < maxFindings {
		c.Findings = append(c.Findings, fmt.Sprintf(format, args...))
	}
}

// findReported describes a duplicate counted in DupReported, while there is room for it.
func (c *ChannelReport) findReported(format string, args ...any) {
	if c.reportedFindings < maxReportedFindings && len(c.Findings) < maxFindings {
		c.reportedFindings++
		c.find(format, args...)
	}
}

// check compares what was published with what each subscriber (logs[i] is subscriber i+1's)
// received, channel by channel.
func check(channels []string, published []Published, logs [][]Entry) []ChannelReport {
	byChannel := map[string][]Published{}
	for _, p := range published {
		byChannel[p.Channel] = append(byChannel[p.Channel], p)
	}
	var out []ChannelReport
	for _, ch := range channels {
		c := ChannelReport{Channel: ch}
		events := byChannel[ch]
		pubs := map[string]bool{}
		for _, e := range events {
			c.Published++
			if e.Acked {
				c.Acked++
			}
			if !pubs[e.Publisher] {
				pubs[e.Publisher] = true
				c.Publishers = append(c.Publishers, e.Publisher)
			}
		}
		sort.Strings(c.Publishers)
		for i, log := range logs {
			checkOne(&c, fmt.Sprintf("s%d", i+1), ch, events, log)
		}
		out = append(out, c)
	}
	return out
}

// delivery is one event handed on to a subscriber: its number and its place in the
// subscriber's log of the channel.
type delivery struct {
	seq, at int
}

// eventID is an event of a channel: its publisher and number.
type eventID struct {
	publisher string
	seq       int
}

// checkOne checks one subscriber's log of channel ch against the events published to it.
func checkOne(c *ChannelReport, sub, ch string, events []Published, log []Entry) {
	var entries []Entry // the subscriber's entries of ch, in order
	for _, e := range log {
		if e.Channel == ch {
			entries = append(entries, e)
		}
	}
	acked := map[string]map[int]bool{} // publisher -> number -> acknowledged
	for _, e := range events {
		if acked[e.Publisher] == nil {
			acked[e.Publisher] = map[int]bool{}
		}
		acked[e.Publisher][e.Seq] = e.Acked
	}
	subscribedAt := time.Duration(-1) // the first subscription's time
	var failed []int                  // places of the recoveries answered recovered:false
	seen := map[string]map[int]int{}  // publisher -> number -> deliveries
	first := map[string][]delivery{}  // publisher -> first deliveries, in order
	last := map[eventID]int{}         // each event's last delivery, its place
	highest := map[string]int{}
	for at, e := range entries {
		switch e.Kind {
		case Subscribed:
			if subscribedAt < 0 {
				subscribedAt = e.At
			}
		case Recovery:
			if !e.Asked {
				continue
			}
			if e.Recovered {
				c.Recovered++
			} else {
				c.NotRecovered = addCounts(c.NotRecovered, map[string]int{e.Reason: 1})
				failed = append(failed, at)
			}
		case Received:
			if e.Publisher == warmUp {
				continue
			}
			if e.Dropped && e.Was != "" {
				c.ReplayedDropped++
				c.Reused++
				c.find("%s: %s-%d came at %v on node-%d with position %s, where it had handled %s: a position given twice, the event dropped as a replay",
					sub, e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node, posText(e.Pos), e.Was)
				continue
			}
			if e.Dropped {
				c.ReplayedDropped++
				c.find("%s: %s-%d came again at %v on node-%d with position %s, at or below the one it had handled: dropped",
					sub, e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node, posText(e.Pos))
				continue
			}
			if seen[e.Publisher] == nil {
				seen[e.Publisher] = map[int]int{}
			}
			seen[e.Publisher][e.Seq]++
			id := eventID{e.Publisher, e.Seq}
			before, again := last[id]
			last[id] = at
			wasAcked, known := acked[e.Publisher][e.Seq]
			told := -1 // a duplicate's recovery answered epoch_changed since its delivery before
			if again && wasAcked {
				told = toldEpochChanged(entries, failed, before, at)
			}
			switch {
			case !known:
				c.find("%s: %s-%d delivered at %v on node-%d was never published to %s", sub, e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node, ch)
			case told >= 0:
				c.DupReported++
				b := entries[before]
				c.findReported("%s: %s-%d delivered again at %v on node-%d (position %s), in another epoch than at %v (position %s), after a recovery answered recovered:false, %s at %v: reported, not a failure",
					sub, e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node, posText(e.Pos), b.At.Round(time.Millisecond), posText(b.Pos),
					epochChanged, entries[told].At.Round(time.Millisecond))
			case seen[e.Publisher][e.Seq] > 1 && wasAcked:
				c.Duplicates++
				c.find("%s: %s-%d delivered again at %v on node-%d (position %s)", sub, e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node, posText(e.Pos))
			case seen[e.Publisher][e.Seq] > 1:
				c.UnackedDuplicates++
				c.find("%s: %s-%d, never acknowledged, delivered again at %v on node-%d (position %s)", sub, e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node, posText(e.Pos))
			case e.Seq < highest[e.Publisher]:
				c.Reorders++
				c.find("%s: %s-%d delivered at %v on node-%d after %s-%d", sub, e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node, e.Publisher, highest[e.Publisher])
			}
			if seen[e.Publisher][e.Seq] == 1 {
				first[e.Publisher] = append(first[e.Publisher], delivery{e.Seq, at})
				if !wasAcked && known {
					c.UnackedDelivered++
				}
			}
			highest[e.Publisher] = max(highest[e.Publisher], e.Seq)
		}
	}
	// Per publisher, its first deliveries by number, and from each on the earliest place in
	// the log of a delivery of that number or a later one.
	earliest := map[string][]int{}
	for p, ds := range first {
		slices.SortFunc(ds, func(a, b delivery) int { return a.seq - b.seq })
		e := make([]int, len(ds))
		for i := len(ds) - 1; i >= 0; i-- {
			e[i] = ds[i].at
			if i+1 < len(ds) {
				e[i] = min(e[i], e[i+1])
			}
		}
		earliest[p] = e
	}
	for _, e := range events {
		if !e.Acked || subscribedAt < 0 || e.First < subscribedAt {
			continue // not acknowledged, or published before the subscriber was there
		}
		c.Expected++
		if seen[e.Publisher][e.Seq] > 0 {
			c.Delivered++
			continue
		}
		// A recovered:false answered after the event was sent and before the subscriber
		// received any later event of its publisher reported what the event is part of.
		ds := first[e.Publisher]
		i := sort.Search(len(ds), func(i int) bool { return ds[i].seq > e.Seq })
		from, to := -1, len(entries)
		if i > 0 {
			from = ds[i-1].at
		}
		if i < len(ds) {
			to = earliest[e.Publisher][i]
		}
		reason := ""
		for _, f := range failed {
			if f < to && entries[f].At >= e.First {
				reason = entries[f].Reason
				break
			}
		}
		if reason != "" {
			c.LostReported = addCounts(c.LostReported, map[string]int{reason: 1})
			continue
		}
		c.Lost++
		c.find("%s: %s-%d (acknowledged at %v) never delivered; %s", sub, e.Publisher, e.Seq, e.Done.Round(time.Millisecond), around(entries, from, to))
	}
}

// toldEpochChanged returns the place of a recovery answered recovered:false, epoch_changed
// (among failed, the places of those answered recovered:false) between an event's delivery
// at place before and its delivery again at place at, when the two came with positions of
// different epochs; -1 otherwise. Such a repeat follows a discontinuity the subscriber was
// told of: the history its first delivery was part of is gone.
func toldEpochChanged(entries []Entry, failed []int, before, at int) int {
	a, b := entries[before].Pos, entries[at].Pos
	if a == nil || b == nil || a.Epoch == b.Epoch {
		return -1
	}
	for _, f := range failed {
		if f > before && f < at && entries[f].Reason == epochChanged {
			return f
		}
	}
	return -1
}

// around describes the deliveries before and after a lost event.
func around(entries []Entry, from, to int) string {
	s := "nothing delivered before it"
	if from >= 0 {
		e := entries[from]
		s = fmt.Sprintf("%s-%d delivered before it at %v on node-%d", e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node)
	}
	if to < len(entries) {
		e := entries[to]
		return s + fmt.Sprintf(", %s-%d after it at %v on node-%d", e.Publisher, e.Seq, e.At.Round(time.Millisecond), e.Node)
	}
	return s + ", nothing after it"
}

func posText(p *Position) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%s/%d", p.Epoch, p.Offset)
}
