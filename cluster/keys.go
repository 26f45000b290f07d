package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

// DefaultMaxKeys is how many idempotency keys a node remembers unless configured otherwise
// (Config.MaxKeys): about 200 bytes each.
const DefaultMaxKeys = 1 << 20

// KeyStats are a node's counters of idempotency keys.
type KeyStats struct {
	Held     int    // keys remembered now
	Repeats  uint64 // events not published again: their key's first publish had succeeded
	Waits    uint64 // publishes that waited for another of their key in flight
	Evicted  uint64 // keys forgotten before their window ended, past MaxKeys
	Conflict uint64 // publishes refused: another of their key stayed in flight past the timeout
	// Received counts the events of channels without history received from the bus again
	// within their key's window, and not delivered again (a cluster node: received.go).
	Received uint64
}

// keys remembers the idempotency keys of the events this node published, for the key window:
// the first publish of a key goes through; a repeat while it is in flight waits for its
// outcome; a repeat after it succeeded is not published again (and answered as it was); a key
// whose publish failed is forgotten, so that a retry goes through. Keys are an app's channel's:
// the same key on another channel is another event.
type keys struct {
	window time.Duration
	max    int

	mu    sync.Mutex
	m     map[keyID]*keyState
	queue []keyRef // in the order of their windows' ends (the window is fixed)
	head  int

	repeats, waits, evicted, conflict atomic.Uint64
}

type keyID struct{ app, channel, key string }

// keyState is one key's publish: done is closed when it ends, ok set before.
type keyState struct {
	done  chan struct{}
	ok    bool
	until time.Time // when ok: the end of its window
}

type keyRef struct {
	id keyID
	st *keyState
}

func newKeys(window time.Duration, most int) *keys {
	return &keys{window: window, max: most, m: map[keyID]*keyState{}}
}

// claim takes the keys of evs for one publish. It returns which events to leave out (repeats
// of publishes that succeeded, and events of one key after the first in evs) and the keys
// taken, to settle once the publish is over; (nil, nil, nil) when no event has a key, at no
// cost. While a key is another publish's in flight it waits for that publish, up to timeout;
// then it fails with CodeBusy, having taken nothing.
func (k *keys) claim(timeout time.Duration, app string, evs []herald.Event) (skip []bool, held []*keyState, err error) {
	keyed := false
	for i := range evs {
		keyed = keyed || local(&evs[i])
	}
	if !keyed {
		return nil, nil, nil
	}
	var expired <-chan time.Time
	for {
		wait := k.tryClaim(app, evs, &skip, &held)
		if wait == nil {
			return skip, held, nil
		}
		k.waits.Add(1)
		if expired == nil {
			t := time.NewTimer(timeout)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-wait:
		case <-expired:
			k.conflict.Add(1)
			return nil, nil, herald.Errorf(herald.CodeBusy, "another publish of the same idempotency key is in flight: retry later")
		}
	}
}

// tryClaim takes every key of evs, or none and returns the done channel of one in flight.
func (k *keys) tryClaim(app string, evs []herald.Event, skip *[]bool, held *[]*keyState) <-chan struct{} {
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expireLocked(now)
	for i := range evs {
		if !local(&evs[i]) {
			continue
		}
		if st := k.m[keyID{app, evs[i].Channel, evs[i].Key}]; st != nil && !st.ok {
			return st.done
		}
	}
	*skip = make([]bool, len(evs))
	*held = (*held)[:0]
	for i := range evs {
		if !local(&evs[i]) {
			continue
		}
		id := keyID{app, evs[i].Channel, evs[i].Key}
		if st := k.m[id]; st != nil {
			(*skip)[i] = true // a repeat of a publish that succeeded, or of an event before it in evs
			if st.ok {
				k.repeats.Add(1)
			}
			continue
		}
		st := &keyState{done: make(chan struct{})}
		k.m[id] = st
		k.queue = append(k.queue, keyRef{id, st})
		*held = append(*held, st)
	}
	return nil
}

// local reports whether this node's memory of keys applies to ev: it has a key, and is not
// handed off again after a lost bus connection (herald.Event.Resent).
func local(ev *herald.Event) bool { return ev.Key != "" && !ev.Resent }

// settle ends the publish that took held: its keys are remembered for the window when it
// succeeded, forgotten when it failed.
func (k *keys) settle(app string, held []*keyState, ok bool) {
	if len(held) == 0 {
		return
	}
	until := time.Now().Add(k.window)
	k.mu.Lock()
	for _, st := range held {
		st.ok, st.until = ok, until
	}
	if !ok {
		k.dropFailedLocked(app, held)
	}
	k.mu.Unlock()
	for _, st := range held {
		close(st.done)
	}
}

// dropFailedLocked forgets the keys of held, whose publish failed. The caller holds k.mu.
func (k *keys) dropFailedLocked(app string, held []*keyState) {
	failed := make(map[*keyState]bool, len(held))
	for _, st := range held {
		failed[st] = true
	}
	for i := len(k.queue) - 1; i >= k.head && len(failed) > 0; i-- {
		r := k.queue[i]
		if failed[r.st] {
			if r.id.app == app && k.m[r.id] == r.st {
				delete(k.m, r.id)
			}
			delete(failed, r.st)
		}
	}
}

// expireLocked forgets the keys whose window has ended, and the oldest past max. The caller
// holds k.mu.
func (k *keys) expireLocked(now time.Time) {
	for k.head < len(k.queue) {
		r := k.queue[k.head]
		cur := k.m[r.id]
		switch {
		case cur != r.st: // failed and forgotten, or taken again since
		case r.st.ok && !now.Before(r.st.until):
			delete(k.m, r.id)
		case len(k.m) > k.max && r.st.ok:
			delete(k.m, r.id)
			k.evicted.Add(1)
		default:
			k.compactLocked()
			return
		}
		k.queue[k.head] = keyRef{}
		k.head++
	}
	k.compactLocked()
}

// compactLocked drops the queue's consumed front once it is most of the queue.
func (k *keys) compactLocked() {
	if k.head > 1024 && k.head*2 > len(k.queue) {
		n := copy(k.queue, k.queue[k.head:])
		clear(k.queue[n:])
		k.queue, k.head = k.queue[:n], 0
	}
}

// stats returns the counters.
func (k *keys) stats() KeyStats {
	k.mu.Lock()
	held := len(k.m)
	k.mu.Unlock()
	return KeyStats{Held: held, Repeats: k.repeats.Load(), Waits: k.waits.Load(), Evicted: k.evicted.Load(), Conflict: k.conflict.Load()}
}
