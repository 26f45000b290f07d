package cluster

import (
	"strconv"
	"testing"
	"time"
)

// A key received again within its window is a repeat; after the window, or on another
// channel or app, it is not; past the bound the oldest keys are forgotten.
func TestReceivedRepeat(t *testing.T) {
	r := newReceived(time.Minute, 1024)
	now := time.Unix(1_800_000_000, 0)
	if r.repeat("a", "c", "k", now) {
		t.Fatal("a first key is a repeat")
	}
	if !r.repeat("a", "c", "k", now.Add(59*time.Second)) {
		t.Fatal("the key again within its window is not a repeat")
	}
	if r.repeat("b", "c", "k", now) || r.repeat("a", "d", "k", now) {
		t.Fatal("the key of another app or channel is a repeat")
	}
	if r.repeat("a", "c", "k", now.Add(61*time.Second)) {
		t.Fatal("the key after its window is a repeat")
	}
	for i := range 3000 {
		r.repeat("a", "c", strconv.Itoa(i), now.Add(62*time.Second))
	}
	if n := len(r.m); n > 1024 || r.evicted.Load() < 1900 {
		t.Fatalf("%d keys held, %d evicted after 3000 with a bound of 1024", n, r.evicted.Load())
	}
	if r.repeats.Load() != 1 {
		t.Fatalf("%d repeats counted, want 1", r.repeats.Load())
	}
}
