package broker

import (
	"context"
	"sync"
)

// Key names one (app, channel) on the bus.
type Key struct{ App, Channel string }

// Interests is a node's interest table: how many references each key has, and whether the
// engine holds a bus subscription for it. It runs at most one bus operation per key at a
// time, so a subscribe and an unsubscribe of one key never race on the bus; operations on
// different keys run concurrently.
type Interests struct {
	sub, unsub func(context.Context, Key) error

	mu sync.Mutex
	m  map[Key]*interest
	n  int // keys with refs > 0
}

type interest struct {
	refs      int
	on        bool          // the engine holds a bus subscription (sub ran, unsub has not)
	confirmed bool          // the last sub succeeded and the connection has not been lost since
	busy      chan struct{} // closed when the operation in flight ends; nil when none
	subs      uint64        // sub attempts finished
	err       error         // result of the last sub
}

// NewInterests returns a table whose keys are subscribed on the bus with sub and
// unsubscribed with unsub. sub must leave the engine holding the subscription even when it
// fails to confirm it (it is restored on reconnect); unsub must be safe to call whatever
// sub left behind.
func NewInterests(sub, unsub func(context.Context, Key) error) *Interests {
	return &Interests{sub: sub, unsub: unsub, m: map[Key]*interest{}}
}

// Acquire adds a reference to k and returns once k is confirmed on the bus: at once if it
// already is, else after the subscribe in flight (sharing its result) or one it runs.
// The reference is kept whatever it returns.
func (t *Interests) Acquire(ctx context.Context, k Key) error {
	t.mu.Lock()
	e := t.m[k]
	if e == nil {
		e = &interest{}
		t.m[k] = e
	}
	if e.refs == 0 {
		t.n++
	}
	e.refs++
	seen := e.subs
	for e.busy != nil {
		if err := t.await(ctx, e); err != nil {
			return err
		}
		if e.busy == nil && e.subs > seen && !e.confirmed && e.refs > 0 {
			err := e.err // a subscribe that we waited for failed: share its error
			t.mu.Unlock()
			return err
		}
	}
	err := t.settle(ctx, k, e)
	t.mu.Unlock()
	return err
}

// Release drops a reference to k; the last one unsubscribes k from the bus. A Release
// without a matching Acquire does nothing.
func (t *Interests) Release(ctx context.Context, k Key) error {
	t.mu.Lock()
	e := t.m[k]
	if e == nil || e.refs == 0 {
		t.mu.Unlock()
		return nil
	}
	e.refs--
	if e.refs == 0 {
		t.n--
	}
	for e.busy != nil {
		// The owner of the operation in flight settles k again when it ends.
		if err := t.await(ctx, e); err != nil {
			return err
		}
	}
	err := t.settle(ctx, k, e)
	t.mu.Unlock()
	return err
}

// await waits, with t.mu released, for the operation in flight on e to end. t.mu is held on
// entry; it is held again on a nil return, and released when ctx's error is returned.
func (t *Interests) await(ctx context.Context, e *interest) error {
	b := e.busy
	t.mu.Unlock()
	select {
	case <-b:
	case <-ctx.Done():
		return ctx.Err()
	}
	t.mu.Lock()
	return nil
}

// settle runs bus operations until k's subscription matches its references. t.mu is held
// on entry and on return, and released around each operation; e.busy is nil on entry.
func (t *Interests) settle(ctx context.Context, k Key, e *interest) error {
	for {
		switch {
		case e.refs > 0 && !(e.on && e.confirmed):
			e.busy = make(chan struct{})
			t.mu.Unlock()
			err := t.sub(ctx, k)
			t.mu.Lock()
			close(e.busy)
			e.busy = nil
			e.on, e.confirmed, e.err = true, err == nil, err
			e.subs++
			if err != nil && e.refs > 0 {
				return err
			}
		case e.refs == 0 && e.on:
			e.busy = make(chan struct{})
			t.mu.Unlock()
			err := t.unsub(ctx, k)
			t.mu.Lock()
			close(e.busy)
			e.busy = nil
			e.on, e.confirmed = false, false
			if e.refs == 0 {
				t.drop(k, e)
				return err
			}
		default:
			if e.refs == 0 {
				t.drop(k, e)
			}
			return nil
		}
	}
}

// drop removes e, which has no references, unless k has a newer entry.
func (t *Interests) drop(k Key, e *interest) {
	if t.m[k] == e {
		delete(t.m, k)
	}
}

// Unconfirm marks every key as no longer confirmed, after the engine lost its connection:
// the next Acquire of a key confirms it again on the bus.
func (t *Interests) Unconfirm() {
	t.mu.Lock()
	for _, e := range t.m {
		e.confirmed = false
	}
	t.mu.Unlock()
}

// Keys lists the keys with references, for an engine to subscribe again after a reconnect.
func (t *Interests) Keys() []Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Key, 0, t.n)
	for k, e := range t.m {
		if e.refs > 0 {
			out = append(out, k)
		}
	}
	return out
}

// Len is the number of keys with references.
func (t *Interests) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
