package lograte

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestLimitOncePerInterval(t *testing.T) {
	var l Limit
	now := int64(1_700_000_000_000)
	if !l.Due(now, 1000) {
		t.Fatal("the first line must be let through")
	}
	if l.Due(now+999, 1000) {
		t.Fatal("a second line 999 ms later must wait for the interval")
	}
	if !l.Due(now+1000, 1000) {
		t.Fatal("a line one interval later must be let through")
	}
}

func TestLimitConcurrentCallersGetOne(t *testing.T) {
	var l Limit
	var got atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Due(1_700_000_000_000, 10_000) {
				got.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := got.Load(); n != 1 {
		t.Fatalf("%d of 100 concurrent callers were let through, want 1", n)
	}
}
