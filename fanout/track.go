package fanout

import (
	"sync/atomic"
	"time"
)

// Observer receives one measurement; prometheus.Observer satisfies it.
type Observer interface{ Observe(float64) }

// Latencies are the observers of a group's publishes; nil fields are not measured.
type Latencies struct {
	Publish Observer // publish → last frame queued, in seconds
	Origin  Observer // an event's origin → last frame queued, in seconds
}

// Measure says what one publish's tracking observes; its zero value observes nothing.
// (A pointer to the group's latencies rather than a copy: pubTrack, allocated per observed
// publish, stays in the 32-byte size class.)
type Measure struct {
	lat *Latencies
	at  int64 // the event's origin, Unix nanoseconds; 0: none, or lat.Origin is nil
}

// pubTrack measures one publish until its last frame is queued: each worker that has
// subscribers takes one count, and the last one observes the elapsed times: one time.Now
// per event with an origin, nothing per recipient.
type pubTrack struct {
	start int64 // monotonic nanoseconds, see mono
	left  atomic.Int32
	Measure
}

// track returns the tracking of one publish to ch: nil when m observes nothing, else one
// count for each worker with subscribers of ch now. ok is false when m observes something and
// no worker has a subscriber: there is nothing to publish.
func (m Measure) track(ch *Channel) (t *pubTrack, ok bool) {
	if m.lat == nil || (m.lat.Publish == nil && m.at == 0) {
		return nil, true
	}
	n := int32(0)
	for i := range ch.wcount {
		if ch.wcount[i].Load() > 0 {
			n++
		}
	}
	if n == 0 {
		return nil, false
	}
	t = &pubTrack{start: mono(), Measure: m}
	t.left.Store(n)
	return t, true
}

func (t *pubTrack) done() {
	if t == nil || t.left.Add(-1) != 0 {
		return
	}
	if t.lat.Publish != nil {
		t.lat.Publish.Observe(float64(mono()-t.start) / 1e9)
	}
	if t.at != 0 {
		// A producer's clock ahead of this node's would give a negative time: 0.
		t.lat.Origin.Observe(float64(max(time.Now().UnixNano()-t.at, 0)) / 1e9)
	}
}

// epoch anchors mono, a monotonic clock in nanoseconds.
var epoch = time.Now()

func mono() int64 { return int64(time.Since(epoch)) }

// Mono is the engine's monotonic clock in nanoseconds, for rate limits above it.
func Mono() int64 { return mono() }
