package cluster

import (
	"sync"
	"sync/atomic"
	"time"
)

// received remembers the idempotency keys of the events of channels without history that a
// cluster node received from the bus, for the key window: an event of a key received before
// (a publisher's retry through another node, an ingest source's hand-off again after a lost
// bus connection) is not delivered again. A channel with history needs none: its store keeps
// a key's event once, and its offset says what a node has. At most max keys are remembered;
// past it the oldest are forgotten early.
type received struct {
	window time.Duration
	max    int

	mu    sync.Mutex
	m     map[keyID]time.Time // until when
	queue []keyID             // in the order their windows end (the window is fixed)
	head  int

	repeats, evicted atomic.Uint64
}

func newReceived(window time.Duration, most int) *received {
	return &received{window: window, max: most, m: map[keyID]time.Time{}}
}

// repeat reports whether the key of (app, channel) was received within the window, and
// remembers it when it was not.
func (r *received) repeat(app, channel, key string, now time.Time) bool {
	id := keyID{app, channel, key}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked(now)
	if until, ok := r.m[id]; ok && now.Before(until) {
		r.repeats.Add(1)
		return true
	}
	r.m[id] = now.Add(r.window)
	r.queue = append(r.queue, id)
	return false
}

// expireLocked forgets the keys whose window has ended, and the oldest past max. The caller
// holds r.mu.
func (r *received) expireLocked(now time.Time) {
	for r.head < len(r.queue) {
		id := r.queue[r.head]
		until, ok := r.m[id]
		if ok && now.Before(until) {
			if len(r.m) < r.max {
				break
			}
			r.evicted.Add(1)
		}
		if ok {
			delete(r.m, id)
		}
		r.queue[r.head] = keyID{}
		r.head++
	}
	if r.head > 1024 && r.head*2 > len(r.queue) {
		n := copy(r.queue, r.queue[r.head:])
		clear(r.queue[n:])
		r.queue, r.head = r.queue[:n], 0
	}
}
