package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Report is a run's outcome: what ran, the faults injected, and what the checker found.
type Report struct {
	Setup       Setup         `json:"setup"`
	Seed        uint64        `json:"seed"`
	Duration    time.Duration `json:"duration"` // of the faults and the publishing
	Elapsed     time.Duration `json:"elapsed"`  // of the whole run
	Network     string        `json:"network"`  // "namespaces" or "loopback"
	Nodes       int           `json:"nodes"`
	Publishers  int           `json:"publishers"`
	Subscribers int           `json:"subscribers"`
	Kafka       bool          `json:"kafka"`
	Options     string        `json:"options"` // the rest of the options, as the command line gives them

	Faults      map[Fault]int `json:"faults"`       // injected, by kind
	FaultErrors int           `json:"fault_errors"` // faults that could not be injected or undone
	Schedule    []Step        `json:"schedule"`

	// Attempts is how many publish attempts were made; Failures why those that failed did.
	Attempts int            `json:"attempts"`
	Failures map[string]int `json:"failures,omitempty"`
	// Connections counts the subscribers' connections established, and Closes how they ended
	// ("4200", "no close frame").
	Connections int            `json:"connections"`
	Closes      map[string]int `json:"closes,omitempty"`

	Channels []ChannelReport `json:"channels"`
	Totals   ChannelReport   `json:"totals"`

	// Notes are what the run could not do as asked (no namespaces, so no partitions).
	Notes []string `json:"notes,omitempty"`
	// Problems are what went wrong with the harness itself (a node that did not start again,
	// subscribers that had not caught up when the wait ended): the run is not conclusive.
	Problems []string `json:"problems,omitempty"`
	Dir      string   `json:"dir,omitempty"` // where the logs were kept
}

// Failed reports whether the checker found an acknowledged event lost silently, a duplicate,
// a reorder or a replayed event, or the harness could not complete the run.
func (r *Report) Failed() bool { return r.Totals.Failed() || len(r.Problems) > 0 }

// WriteJSON writes the report to the file at path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Print writes the report for people: the run, the faults, a line per channel, the totals
// and the findings.
func (r *Report) Print(w io.Writer) {
	if r.Setup == "" { // CheckDir's: the logs of a run checked again
		fmt.Fprintf(w, "herald-chaos: the logs in %s checked again (%d subscribers)\n", r.Dir, r.Subscribers)
	} else {
		r.printRun(w)
	}
	fmt.Fprintf(w, "%-14s %8s %8s %9s %9s %5s %13s %5s %12s %6s %8s %8s %6s %9s %s\n", "channel", "publish", "acked",
		"expected", "delivered", "lost", "lost-reported", "dup", "dup-reported", "unack2", "reorder", "replayed", "reused", "recovered", "not recovered")
	for i := range r.Channels {
		printLine(w, &r.Channels[i])
	}
	printLine(w, &r.Totals)
	for _, c := range r.Channels {
		for _, f := range c.Findings {
			fmt.Fprintf(w, "  %s: %s\n", c.Channel, f)
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	verdict := "PASS: no acknowledged event lost, no duplicate, no reorder"
	reported := r.Totals.DupReported
	switch {
	case r.Totals.Failed():
		verdict = fmt.Sprintf("FAIL: %d lost, %d duplicates (%d of unacknowledged events), %d reorders, %d replayed (%d at a position given twice)",
			r.Totals.Lost, r.Totals.Duplicates+r.Totals.UnackedDuplicates, r.Totals.UnackedDuplicates, r.Totals.Reorders, r.Totals.ReplayedDropped, r.Totals.Reused)
		if reported > 0 {
			verdict += fmt.Sprintf("; %d duplicates reported (epoch_changed), not failures", reported)
		}
	case len(r.Problems) > 0:
		verdict = "FAIL: the run did not complete (see the problems above)"
	case reported > 0:
		verdict = fmt.Sprintf("PASS: no acknowledged event lost, no duplicate but %d reported (delivered again after the subscriber was told epoch_changed), no reorder", reported)
	}
	if r.Setup != "" {
		verdict += fmt.Sprintf(" (seed %d)", r.Seed)
	}
	fmt.Fprintln(w, verdict)
	if r.Dir != "" {
		fmt.Fprintf(w, "logs: %s\n", r.Dir)
	}
}

// printRun writes the run's setup, faults, publishes and connections.
func (r *Report) printRun(w io.Writer) {
	fmt.Fprintf(w, "herald-chaos: setup %s, seed %d, %v of faults (%v in all), %d node(s), network %s\n",
		r.Setup, r.Seed, r.Duration, r.Elapsed.Round(time.Second), r.Nodes, r.Network)
	fmt.Fprintf(w, "  %s\n", r.Options)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	var faults []string
	total := 0
	for _, f := range Faults {
		if n, ok := r.Faults[f]; ok {
			faults = append(faults, fmt.Sprintf("%s %d", f, n))
			total += n
		}
	}
	fmt.Fprintf(w, "faults: %d (%s)", total, strings.Join(faults, ", "))
	if r.FaultErrors > 0 {
		fmt.Fprintf(w, "; %d failed", r.FaultErrors)
	}
	fmt.Fprintln(w)
	for _, s := range r.Schedule {
		if s.Fault == PowerCut && s.Started > 0 {
			fmt.Fprintf(w, "power cut at %v, not synced and taken back: %s\n", s.Started.Round(time.Millisecond), s.Lost)
		}
	}
	fmt.Fprintf(w, "publishes: %d attempts, %d failed (%s)\n", r.Attempts, sum(r.Failures), counts(r.Failures))
	fmt.Fprintf(w, "subscribers: %d connections (closes: %s)\n", r.Connections, counts(r.Closes))
}

func printLine(w io.Writer, c *ChannelReport) {
	fmt.Fprintf(w, "%-14s %8d %8d %9d %9d %5d %13s %5d %12d %6d %8d %8d %6d %9d %s\n", c.Channel, c.Published, c.Acked,
		c.Expected, c.Delivered, c.Lost, counts(c.LostReported), c.Duplicates, c.DupReported, c.UnackedDuplicates, c.Reorders,
		c.ReplayedDropped, c.Reused, c.Recovered, counts(c.NotRecovered))
}

// counts writes a map of counts as "a 2, b 1", largest first; "-" when empty.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
