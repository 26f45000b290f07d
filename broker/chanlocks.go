package broker

import "sync"

// ChannelLocks serializes one node's history publishes of each channel and keeps, per
// channel, what the engine knows of it (T). A channel's T is forgotten once no publish holds
// or awaits it and more than Max channels are known (0: never): forgetting costs the next
// publish of that channel a round trip to learn it again. The zero value is ready to use.
type ChannelLocks[T any] struct {
	Max int

	mu sync.Mutex
	m  map[Key]*channelLock[T]
}

type channelLock[T any] struct {
	mu    sync.Mutex // held by the one publish of the channel at a time
	refs  int        // publishes holding or waiting for mu; guarded by ChannelLocks.mu
	state T
}

// Lock locks channel k, waiting for the publish that holds it, and returns its state (the
// zero T for a channel not known) and the unlock to call once done with it.
func (l *ChannelLocks[T]) Lock(k Key) (state *T, unlock func()) {
	l.mu.Lock()
	c := l.m[k]
	if c == nil {
		if l.m == nil {
			l.m = map[Key]*channelLock[T]{}
		}
		c = &channelLock[T]{}
		l.m[k] = c
	}
	c.refs++
	l.mu.Unlock()
	c.mu.Lock()
	return &c.state, func() {
		c.mu.Unlock()
		l.mu.Lock()
		if c.refs--; c.refs == 0 && l.Max > 0 && len(l.m) > l.Max {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
}
