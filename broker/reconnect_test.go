package broker

import (
	"testing"
	"time"
)

// TestBackoff: attempt n waits first × 2ⁿ⁻¹ (attempt 0 as 1), capped at most, within 10%
// either side.
func TestBackoff(t *testing.T) {
	first, most := 100*time.Millisecond, time.Second
	for n := range 10 {
		d := min(first<<max(n-1, 0), most)
		for range 100 {
			if w := Backoff(first, most, n); w < d-d/10 || w > d+d/10 {
				t.Fatalf("Backoff(%d) = %v, want %v..%v", n, w, d-d/10, d+d/10)
			}
		}
	}
}
