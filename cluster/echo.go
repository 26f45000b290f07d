package cluster

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"
)

// echoes lets a publish to cache channels answer only once this node keeps the event: in a
// cluster every node, the publishing one included, keeps a cache channel's last event when
// the bus brings it back (so that every node keeps one channel's events in the bus's order),
// and without the wait a subscriber joining on the publishing node right after its REST
// answer could still get pusher:cache_miss. Nothing of it runs on a single node, nor for
// other channels.
type echoes struct {
	n  atomic.Int32 // waits registered: arrived looks in m only when there are some
	mu sync.Mutex
	m  map[echoKey][]*echoWait
}

type echoKey struct{ app, channel string }

type echoWait struct {
	key   echoKey
	frame []byte
	done  chan struct{}
}

// expect registers a wait for frame's return on channel; call it before publishing frame.
func (e *echoes) expect(app, channel string, frame []byte) *echoWait {
	k := echoKey{app, channel}
	w := &echoWait{key: k, frame: frame, done: make(chan struct{})}
	e.mu.Lock()
	if e.m == nil {
		e.m = map[echoKey][]*echoWait{}
	}
	e.m[k] = append(e.m[k], w)
	e.n.Add(1)
	e.mu.Unlock()
	return w
}

// arrived tells the first wait for the same frame on channel, if any, that this node keeps it.
func (e *echoes) arrived(app, channel string, frame []byte) {
	if e.n.Load() == 0 {
		return
	}
	k := echoKey{app, channel}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, w := range e.m[k] {
		if bytes.Equal(w.frame, frame) {
			close(w.done)
			e.removeLocked(k, i)
			return
		}
	}
}

// cancel withdraws waits that will not be waited for; those already told are gone.
func (e *echoes) cancel(ws []*echoWait) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range ws {
		for i, x := range e.m[w.key] {
			if x == w {
				e.removeLocked(w.key, i)
				break
			}
		}
	}
}

func (e *echoes) removeLocked(k echoKey, i int) {
	list := e.m[k]
	list = append(list[:i], list[i+1:]...)
	if len(list) == 0 {
		delete(e.m, k)
	} else {
		e.m[k] = list
	}
	e.n.Add(-1)
}

// wait waits for every one of ws until d has passed, withdraws the rest, and reports whether
// all came back. The events were handed to the bus already: one that is late is delivered
// and kept all the same, only later than the publisher's answer.
func (e *echoes) wait(ws []*echoWait, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-t.C:
			e.cancel(ws)
			return false
		}
	}
	return true
}
