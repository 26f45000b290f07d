package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// Published is one event a publisher published, or tried to.
type Published struct {
	Publisher string        `json:"publisher"` // p1 ..., or k for the Kafka producer
	Seq       int           `json:"seq"`       // from 1, in the publisher's order
	Channel   string        `json:"channel"`
	Acked     bool          `json:"acked"`    // a 200 (Kafka: the broker's ack) before the run's end
	Attempts  int           `json:"attempts"` // requests sent (Kafka: produce calls)
	First     time.Duration `json:"first"`    // the first attempt's start, from the run's start
	Done      time.Duration `json:"done"`     // the ack, or the last attempt's end
}

// Key is the event's idempotency key: its publisher and number.
func (p Published) Key() string { return p.Publisher + "-" + strconv.Itoa(p.Seq) }

// payload is an event's data: who published it and its number. Warm-up events have the
// publisher "warm-up".
type payload struct {
	P string `json:"p"`
	S int    `json:"s"`
}

func (p payload) encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// warmUp is the publisher of the events that make sure every subscriber receives its
// channels before the run starts.
const warmUp = "warm-up"

// Position is an event's place in its channel's history.
type Position struct {
	Epoch  string `json:"epoch"`
	Offset int64  `json:"offset"`
}

// Kind is the kind of an entry of a subscriber's log.
type Kind string

// The kinds of entries.
const (
	Received   Kind = "event"      // an event of a channel
	Recovery   Kind = "recovery"   // a pusher_internal:recovery
	Subscribed Kind = "subscribed" // pusher_internal:subscription_succeeded
	Connected  Kind = "connected"  // pusher:connection_established
	Closed     Kind = "closed"     // the connection ended (Code: the close frame's, 0 for none)
	Refused    Kind = "refused"    // a pusher:error or pusher:subscription_error (Reason: its data)
)

// Entry is one thing a subscriber saw, in the order it saw them.
type Entry struct {
	At      time.Duration `json:"at"` // from the run's start
	Kind    Kind          `json:"kind"`
	Node    int           `json:"node"` // the node the connection was to
	Channel string        `json:"channel,omitempty"`

	// An event: its publisher and number, and its position (nil when it came without one).
	Publisher string    `json:"publisher,omitempty"`
	Seq       int       `json:"seq,omitempty"`
	Pos       *Position `json:"pos,omitempty"`
	// Dropped: the event came with a position at or below the last the subscriber handled
	// in the same epoch (a replay of an event it has), and was not handed on.
	Dropped bool `json:"dropped,omitempty"`
	// Was: a dropped event whose position the subscriber had handled with another event
	// (publisher-number): the position was given twice, to different events (the store went
	// back, as after a power cut), and the helper drops the second as a replay.
	Was string `json:"was,omitempty"`

	// A recovery: whether the subscription asked to recover, and herald's answer.
	Asked     bool   `json:"asked,omitempty"`
	Recovered bool   `json:"recovered,omitempty"`
	Reason    string `json:"reason,omitempty"`

	Code int `json:"code,omitempty"` // Closed: the close code
}

// writeLogs writes what was published (published.jsonl) and each subscriber's log
// (s1.jsonl, ...) into dir, one JSON object a line.
func writeLogs(dir string, published []Published, logs [][]Entry) error {
	if err := writeLines(filepath.Join(dir, "published.jsonl"), published); err != nil {
		return err
	}
	for i, l := range logs {
		if err := writeLines(filepath.Join(dir, fmt.Sprintf("s%d.jsonl", i+1)), l); err != nil {
			return err
		}
	}
	return nil
}

func writeLines[T any](path string, items []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CheckDir checks again the logs a run kept in dir (published.jsonl, s1.jsonl, ...): the
// report has the checker's findings, not the run's faults.
func CheckDir(dir string) (*Report, error) {
	published, err := readLines[Published](filepath.Join(dir, "published.jsonl"))
	if err != nil {
		return nil, err
	}
	var logs [][]Entry
	for i := 1; ; i++ {
		l, err := readLines[Entry](filepath.Join(dir, fmt.Sprintf("s%d.jsonl", i)))
		if errors.Is(err, os.ErrNotExist) && i > 1 {
			break
		}
		if err != nil {
			return nil, err
		}
		logs = append(logs, l)
	}
	seen := map[string]bool{}
	var channels []string
	for _, p := range published {
		if !seen[p.Channel] {
			seen[p.Channel] = true
			channels = append(channels, p.Channel)
		}
	}
	sort.Strings(channels)
	rep := &Report{Subscribers: len(logs), Channels: check(channels, published, logs), Dir: dir}
	rep.Totals.Channel = "total"
	for i := range rep.Channels {
		rep.Totals.add(&rep.Channels[i])
	}
	return rep, nil
}

func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var v T
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, v)
	}
}
