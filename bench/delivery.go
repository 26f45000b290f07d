package bench

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync/atomic"
)

// sample is one fan-out delivery as a subscriber saw it: the event's sequence number and the
// time from publish to receive. Each subscriber appends its own samples, in arrival order, so
// recording takes no lock; histograms are built from them after the run.
type sample struct {
	seq int32
	lat int64 // nanoseconds
}

// recorder counts deliveries across all subscribers and signals when the expected number has
// arrived.
type recorder struct {
	events   int // events in the run: the capacity of each subscriber's sample list
	expected atomic.Int64
	count    atomic.Int64
	all      chan struct{} // closed when count reaches expected
}

func newRecorder(events int) *recorder {
	return &recorder{events: events, all: make(chan struct{})}
}

// expect sets how many deliveries complete the run; call before the first publish.
func (r *recorder) expect(n int64) {
	r.expected.Store(n)
	if n == 0 {
		close(r.all)
	}
}

func (r *recorder) delivered() {
	// Exactly one delivery makes the count equal the expected number, so all closes once.
	if r.count.Add(1) == r.expected.Load() {
		close(r.all)
	}
}

// benchEvent is what a subscriber looks for in a frame from a Pusher server, fast path first:
// `"event":"bench"` with the data's fields JSON-escaped inside the data string.
var (
	benchEventKey = []byte(`"event":"bench"`)
	escSeqKey     = []byte(`\"seq\":`)
	escTimeKey    = []byte(`\"t\":`)
	pusherPing    = []byte(`"pusher:ping"`)
)

// parseBench returns the seq and send time (unix nanoseconds) of a fan-out event, and false for
// any other message. The fast path reads the compact form every known server writes; anything
// else naming the event is decoded in full.
func parseBench(p []byte) (seq int, sent int64, ok bool) {
	if bytes.Contains(p, benchEventKey) {
		s, ok1 := intAfter(p, escSeqKey)
		t, ok2 := intAfter(p, escTimeKey)
		if ok1 && ok2 {
			return int(s), t, true
		}
	}
	if !bytes.Contains(p, []byte("bench")) {
		return 0, 0, false
	}
	var m struct {
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	}
	if json.Unmarshal(p, &m) != nil || m.Event != "bench" {
		return 0, 0, false
	}
	data := []byte(m.Data)
	var s string
	if json.Unmarshal(data, &s) == nil {
		data = []byte(s)
	}
	var d struct {
		Seq *int   `json:"seq"`
		T   *int64 `json:"t"`
	}
	if json.Unmarshal(data, &d) != nil || d.Seq == nil || d.T == nil {
		return 0, 0, false
	}
	return *d.Seq, *d.T, true
}

// intAfter parses the decimal integer that follows the first occurrence of key in p.
func intAfter(p, key []byte) (int64, bool) {
	i := bytes.Index(p, key)
	if i < 0 {
		return 0, false
	}
	p = p[i+len(key):]
	j := 0
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(string(p[:j]), 10, 64)
	return n, err == nil
}

// isPusherPing reports whether a message is pusher:ping.
func isPusherPing(p []byte) bool {
	if !bytes.Contains(p, pusherPing) {
		return false
	}
	var m struct {
		Event string `json:"event"`
	}
	return json.Unmarshal(p, &m) == nil && m.Event == "pusher:ping"
}

// Delivery counts fan-out deliveries by exact sequence number, per subscriber.
type Delivery struct {
	Expected   int64   `json:"expected"`     // subscribers × events
	Delivered  int64   `json:"delivered"`    // distinct (subscriber, seq) pairs received
	Received   int64   `json:"received"`     // every event frame, duplicates included
	Percent    float64 `json:"percent"`      // Delivered / Expected × 100
	Missing    int64   `json:"missing"`      // expected pairs never received
	Duplicated int64   `json:"duplicated"`   // frames repeating a seq the subscriber already had
	OutOfOrder int64   `json:"out_of_order"` // first receipts of a seq lower than one already received
	Unexpected int64   `json:"unexpected"`   // frames whose seq was never published
	// WaitSeconds is how long after the last publish the run waited for deliveries; Complete
	// says whether every expected delivery had arrived by then.
	WaitSeconds float64 `json:"wait_seconds"`
	Complete    bool    `json:"complete"`
}

// count tallies one subscriber's samples against events 1..events. seen is scratch space of
// events+1 entries; it is cleared on return. It returns the samples that count for latency:
// the first receipt of each published seq.
func (d *Delivery) count(samples []sample, events int, seen []bool, firsts func(sample)) {
	maxSeq := int32(0)
	distinct := int64(0)
	for _, s := range samples {
		d.Received++
		switch {
		case s.seq < 1 || int(s.seq) > events:
			d.Unexpected++
			continue
		case seen[s.seq]:
			d.Duplicated++
			continue
		}
		seen[s.seq] = true
		distinct++
		if s.seq < maxSeq {
			d.OutOfOrder++
		}
		maxSeq = max(maxSeq, s.seq)
		firsts(s)
	}
	d.Delivered += distinct
	d.Missing += int64(events) - distinct
	d.Expected += int64(events)
	clear(seen)
}

func (d *Delivery) finish() {
	if d.Expected > 0 {
		d.Percent = float64(d.Delivered) * 100 / float64(d.Expected)
	}
}
