package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// recorder is what every subscriber of a run records into: first receipts of expected events
// (counted, and their latency kept in histograms) and every event frame. It is safe for
// concurrent use.
type recorder struct {
	channels []string // the run's channels; a track names its channel by index here
	maxSeq   int      // seqs above it are unexpected, and not stored
	// started, when set, returns how many events have been published on a channel so far: a
	// subscription expects only the events published after it succeeded.
	started func(ch int) int32
	// bucket, when set, maps a seq to its latency histogram beside the overall one (fanout's
	// per event, multichannel's per round); buckets is how many there are.
	bucket  func(seq int) int
	buckets int
	// other, when set, gets every other text message a client receives (not a bench event,
	// not a pusher:ping): presence's member events. It runs on the client's reader; p is
	// only valid during the call.
	other func(c *client, p []byte)
	// seen, when set, gets every bench event of a channel a client joined, after its track
	// counted it (first: its first receipt of an expected seq); it runs on the client's
	// reader. recoverFrom, when set, returns the position a client's subscribe to its track
	// asks to recover from (nil: none); it runs where the client is set up. Both are
	// recover's bookkeeping.
	seen        func(c *client, track, seq int, first bool)
	recoverFrom func(c *client, track int) any
	tl          *Timeline // nil: no timeline
	shards      []latencyShard

	frames   atomic.Int64 // event frames received, duplicates included
	pings    atomic.Int64 // pusher:ping messages answered
	hits     atomic.Int64 // first receipts of expected events
	expected atomic.Int64 // hits that complete the run
	all      chan struct{}
	once     sync.Once
}

// latencyShards spreads latency recording over a few locks: clients record into shard
// index % latencyShards.
const latencyShards = 2

// latencyShard keeps latencies twice: from the send time stamped just before each request,
// and from the time the schedule meant to send it (fromSched), which a server slow to answer
// the publisher cannot hide (coordinated omission).
type latencyShard struct {
	mu          sync.Mutex
	all         histogram
	fromSched   histogram
	bucket      []histogram
	bucketSched []histogram
	bucketLast  []int64 // per bucket: receive time of its latest first receipt
	lastNs      int64   // receive time of the latest first receipt
}

func newRecorder(channels []string, maxSeq int, tl *Timeline) *recorder {
	r := &recorder{channels: channels, maxSeq: maxSeq, tl: tl, all: make(chan struct{}), shards: make([]latencyShard, latencyShards)}
	r.expected.Store(1 << 62)
	for i := range r.shards {
		r.shards[i].all = newHistogram()
		r.shards[i].fromSched = newHistogram()
	}
	return r
}

// withBuckets keeps a histogram per bucket of seqs as well; call before any client records.
func (r *recorder) withBuckets(n int, bucket func(seq int) int) *recorder {
	r.buckets, r.bucket = n, bucket
	for i := range r.shards {
		s := &r.shards[i]
		s.bucket, s.bucketSched, s.bucketLast = newHistograms(n), newHistograms(n), make([]int64, n)
	}
	return r
}

// expect sets how many first receipts complete the run.
func (r *recorder) expect(n int64) {
	r.expected.Store(n)
	if r.hits.Load() >= n {
		r.once.Do(func() { close(r.all) })
	}
}

// hit records the first receipt, at nowNs, of an expected event, latNs after it was sent and
// schedNs after it was scheduled.
func (r *recorder) hit(shard int, seq int, latNs, schedNs, nowNs int64) {
	s := &r.shards[shard%len(r.shards)]
	s.mu.Lock()
	s.all.record(latNs)
	s.fromSched.record(schedNs)
	if r.bucket != nil {
		if b := r.bucket(seq); b >= 0 && b < len(s.bucket) {
			s.bucket[b].record(latNs)
			s.bucketSched[b].record(schedNs)
			s.bucketLast[b] = max(s.bucketLast[b], nowNs)
		}
	}
	s.lastNs = max(s.lastNs, nowNs)
	s.mu.Unlock()
	if r.tl != nil {
		r.tl.Delivered(latNs)
	}
	if r.hits.Add(1) >= r.expected.Load() {
		r.once.Do(func() { close(r.all) })
	}
}

// await waits until every expected receipt arrived (true), wait passed or ctx ended.
func (r *recorder) await(ctx interface{ Done() <-chan struct{} }, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.all:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-r.all:
		return true
	default:
		return false
	}
}

// benchEvent is what a subscriber looks for in a frame from a Pusher server, fast path first:
// `"event":"bench"` with the data's fields JSON-escaped inside the data string.
var (
	benchEventKey = []byte(`"event":"bench"`)
	channelKey    = []byte(`"channel":"`)
	escSeqKey     = []byte(`\"seq\":`)
	escTimeKey    = []byte(`\"t\":`)
	escSchedKey   = []byte(`\"s\":`)
	pusherPing    = []byte(`"pusher:ping"`)
)

// parseBench returns the seq, send and scheduled times (unix nanoseconds; the send time when
// the event has no schedule) and channel of a bench event, and false for any other message.
// channel aliases p.
func parseBench(p []byte) (seq int, sent, sched int64, channel []byte, ok bool) {
	if seq, sent, sched, channel, ok = parseBenchFast(p); ok {
		return seq, sent, sched, channel, true
	}
	if !bytes.Contains(p, []byte("bench")) {
		return 0, 0, 0, nil, false
	}
	var m struct {
		Event   string          `json:"event"`
		Channel string          `json:"channel"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(p, &m) != nil || m.Event != benchEventName {
		return 0, 0, 0, nil, false
	}
	data := []byte(m.Data)
	var s string
	if json.Unmarshal(data, &s) == nil {
		data = []byte(s)
	}
	var d struct {
		Seq *int   `json:"seq"`
		T   *int64 `json:"t"`
		S   *int64 `json:"s"`
	}
	if json.Unmarshal(data, &d) != nil || d.Seq == nil || d.T == nil {
		return 0, 0, 0, nil, false
	}
	sched = *d.T
	if d.S != nil {
		sched = *d.S
	}
	return *d.Seq, *d.T, sched, []byte(m.Channel), true
}

// parseBenchFast reads the compact form every known server writes, whatever the order of its
// members: `"event":"bench"`, `"channel":"name"` and the data's fields JSON-escaped inside the
// data string. It runs once per delivery and allocates nothing.
func parseBenchFast(p []byte) (seq int, sent, sched int64, channel []byte, ok bool) {
	if !bytes.Contains(p, benchEventKey) {
		return 0, 0, 0, nil, false
	}
	s, ok1 := intAfter(p, escSeqKey)
	t, ok2 := intAfter(p, escTimeKey)
	i := bytes.Index(p, channelKey)
	if !ok1 || !ok2 || i < 0 {
		return 0, 0, 0, nil, false
	}
	channel = p[i+len(channelKey):]
	j := bytes.IndexByte(channel, '"')
	if j < 0 || bytes.IndexByte(channel[:j], '\\') >= 0 {
		return 0, 0, 0, nil, false
	}
	sched, ok = intAfter(p, escSchedKey)
	if !ok {
		sched = t
	}
	return int(s), t, sched, channel[:j], true
}

// intAfter parses the decimal integer (at most 19 digits, under 2^63) that follows the
// first occurrence of key in p.
func intAfter(p, key []byte) (int64, bool) {
	i := bytes.Index(p, key)
	if i < 0 {
		return 0, false
	}
	p = p[i+len(key):]
	var n uint64
	j := 0
	for ; j < len(p) && p[j] >= '0' && p[j] <= '9'; j++ {
		if j == 19 {
			return 0, false
		}
		n = n*10 + uint64(p[j]-'0')
	}
	if j == 0 || n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
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
