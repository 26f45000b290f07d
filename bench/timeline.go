package bench

import (
	"sync"
	"sync/atomic"
	"time"
)

// Point is one second of a run: what the live progress line shows and what the HTML report
// plots. Latency fields are over the events received during that second.
type Point struct {
	Second      float64 `json:"t"`           // seconds since the timeline started
	Connections int64   `json:"connections"` // open, subscribed connections at the end of the second
	Attempts    int64   `json:"attempts"`    // connection attempts so far
	Failed      int64   `json:"failed"`      // failed attempts so far
	Delivered   int64   `json:"delivered"`   // events received during the second
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
}

// Timeline records a run second by second. Clients record into it concurrently; each call
// costs an atomic add or a short critical section on the current second's histogram.
// Start it with Start and stop it with Stop; the zero value is not usable, use NewTimeline.
type Timeline struct {
	start    time.Time
	conns    atomic.Int64
	attempts atomic.Int64
	failed   atomic.Int64

	mu        sync.Mutex // guards cur, delivered and points
	cur       histogram
	delivered int64
	points    []Point

	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started atomic.Bool
}

// NewTimeline returns a timeline whose clock starts now.
func NewTimeline() *Timeline {
	return &Timeline{start: time.Now(), cur: newHistogram(), stop: make(chan struct{}), done: make(chan struct{})}
}

// Attempt counts one connection attempt.
func (t *Timeline) Attempt() { t.attempts.Add(1) }

// Failed counts one failed connection attempt.
func (t *Timeline) Failed() { t.failed.Add(1) }

// Connected adds delta to the open connections: +1 once a client is subscribed, -1 when it
// closes or is lost.
func (t *Timeline) Connected(delta int) { t.conns.Add(int64(delta)) }

// Delivered records one event received with its publish → receive latency.
func (t *Timeline) Delivered(latNs int64) {
	t.mu.Lock()
	t.cur.record(latNs)
	t.delivered++
	t.mu.Unlock()
}

// Start samples the timeline once a second until Stop.
func (t *Timeline) Start() {
	if t.started.Swap(true) {
		return
	}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				t.sample()
			case <-t.stop:
				t.sample()
				return
			}
		}
	}()
}

// Stop ends sampling after one last point; it is idempotent and safe without Start. It waits
// for that point however long a busy machine takes to schedule it: the sampler blocks on
// nothing but the timeline's own short critical sections.
func (t *Timeline) Stop() {
	t.once.Do(func() { close(t.stop) })
	if !t.started.Load() {
		return
	}
	<-t.done
}

func (t *Timeline) sample() {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.cur.summary()
	t.points = append(t.points, Point{
		Second:      time.Since(t.start).Seconds(),
		Connections: t.conns.Load(),
		Attempts:    t.attempts.Load(),
		Failed:      t.failed.Load(),
		Delivered:   t.delivered,
		P50Ms:       l.P50Ms,
		P99Ms:       l.P99Ms,
		MaxMs:       l.MaxMs,
	})
	t.cur.h.Reset()
	t.delivered = 0
}

// Last returns the most recent point, and false before the first second has passed.
func (t *Timeline) Last() (Point, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.points) == 0 {
		return Point{}, false
	}
	return t.points[len(t.points)-1], true
}

// Points returns a copy of every point so far.
func (t *Timeline) Points() []Point {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Point(nil), t.points...)
}
