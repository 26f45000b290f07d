package ingest

import (
	"testing"
	"time"
)

// TestBackoff: 100 ms doubling to 5 s, the same every time.
func TestBackoff(t *testing.T) {
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	for n, w := range want {
		if got := Backoff(n); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
}
