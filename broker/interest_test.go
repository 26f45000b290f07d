package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestInterestsConcurrent: many goroutines take and drop references to a few keys; the bus
// never sees two operations on one key at once, and ends subscribed to exactly the keys
// with references.
func TestInterestsConcurrent(t *testing.T) {
	var mu sync.Mutex
	on := map[Key]bool{}
	inflight := map[Key]*atomic.Int32{}
	for _, c := range []string{"a", "b", "c"} {
		inflight[Key{"app", c}] = &atomic.Int32{}
	}
	op := func(state bool) func(context.Context, Key) error {
		return func(_ context.Context, k Key) error {
			if inflight[k].Add(1) != 1 {
				t.Errorf("two bus operations on %v at once", k)
			}
			mu.Lock()
			on[k] = state
			mu.Unlock()
			inflight[k].Add(-1)
			return nil
		}
	}
	tab := NewInterests(op(true), op(false))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := Key{"app", string("abc"[(g+i)%3])}
				if err := tab.Acquire(context.Background(), k); err != nil {
					t.Error(err)
				}
				mu.Lock()
				ok := on[k]
				mu.Unlock()
				if !ok {
					t.Errorf("Acquire(%v) returned before the key was subscribed", k)
				}
				if i%2 == 0 || g == 0 && i > 1990 { // goroutine 0 keeps its last references
					continue
				}
				_ = tab.Release(context.Background(), k)
			}
		}()
	}
	wg.Wait()
	// Drop the references taken on even rounds, except goroutine 0's last ones.
	keys := tab.Keys()
	if tab.Len() != len(keys) {
		t.Errorf("Len %d, Keys %v", tab.Len(), keys)
	}
	for _, k := range keys {
		if !on[k] {
			t.Errorf("%v has references but is not subscribed", k)
		}
	}
}

// TestInterestsFailure: a failed subscribe keeps the reference; waiters share the error;
// the next Acquire tries again; the last Release unsubscribes.
func TestInterestsFailure(t *testing.T) {
	fail := errors.New("bus down")
	var subs, unsubs atomic.Int32
	var down atomic.Bool
	down.Store(true)
	tab := NewInterests(func(context.Context, Key) error {
		subs.Add(1)
		if down.Load() {
			return fail
		}
		return nil
	}, func(context.Context, Key) error { unsubs.Add(1); return nil })
	k := Key{"app", "c"}
	if err := tab.Acquire(context.Background(), k); err != fail {
		t.Fatalf("Acquire while down = %v", err)
	}
	if tab.Len() != 1 {
		t.Fatalf("reference not kept after a failed subscribe: Len %d", tab.Len())
	}
	down.Store(false)
	if err := tab.Acquire(context.Background(), k); err != nil {
		t.Fatalf("Acquire after the bus came back = %v", err)
	}
	if err := tab.Acquire(context.Background(), k); err != nil || subs.Load() != 2 {
		t.Fatalf("Acquire of a confirmed key = %v after %d subscribes; want nil after 2", err, subs.Load())
	}
	tab.Unconfirm()
	if err := tab.Acquire(context.Background(), k); err != nil || subs.Load() != 3 {
		t.Fatalf("Acquire after Unconfirm = %v after %d subscribes; want nil after 3", err, subs.Load())
	}
	for i := 0; i < 4; i++ {
		_ = tab.Release(context.Background(), k)
	}
	if unsubs.Load() != 1 || tab.Len() != 0 || len(tab.m) != 0 {
		t.Errorf("after the last Release: %d unsubscribes, Len %d, %d entries; want 1, 0, 0", unsubs.Load(), tab.Len(), len(tab.m))
	}
}
