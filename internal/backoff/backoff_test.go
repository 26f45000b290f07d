package backoff

import (
	"math"
	"testing"
	"time"
)

// TestGrowth: without jitter the waits are First, 2×First, 4×First, ... up to Most, and stay
// there; large attempt numbers and large durations do not overflow.
func TestGrowth(t *testing.T) {
	p := Policy{First: 100 * time.Millisecond, Most: 5 * time.Second}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for n, w := range want {
		if got := p.Wait(n); got != w*time.Millisecond {
			t.Errorf("Wait(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	for _, n := range []int{-1, math.MinInt} {
		if got := p.Wait(n); got != p.First {
			t.Errorf("Wait(%d) = %v, want First (%v)", n, got, p.First)
		}
	}
	for _, n := range []int{63, 64, 1000, math.MaxInt} {
		if got := p.Wait(n); got != p.Most {
			t.Errorf("Wait(%d) = %v, want Most (%v)", n, got, p.Most)
		}
	}
	huge := Policy{First: time.Second, Most: math.MaxInt64}
	prev := time.Duration(0)
	for n := range 100 {
		d := huge.Wait(n)
		if d < prev || d > huge.Most {
			t.Fatalf("Wait(%d) = %v after %v: want growth up to Most", n, d, prev)
		}
		prev = d
	}
	if prev != huge.Most {
		t.Errorf("Wait(99) = %v, want Most", prev)
	}
	if got := (Policy{First: time.Minute, Most: time.Second}).Wait(0); got != time.Second {
		t.Errorf("First above Most: Wait(0) = %v, want Most", got)
	}
	if got := (Policy{}).Wait(5); got != 0 {
		t.Errorf("zero Policy: Wait(5) = %v, want 0", got)
	}
}

// TestJitterBounds: each jittered wait lies in its range around the unjittered one, and the
// waits do spread over it.
func TestJitterBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		jitter Jitter
		lo, hi func(d time.Duration) time.Duration
	}{
		{"half off", Jitter{Below: 0.5},
			func(d time.Duration) time.Duration { return d / 2 }, func(d time.Duration) time.Duration { return d }},
		{"20% around", Jitter{Below: 0.1, Above: 0.1},
			func(d time.Duration) time.Duration { return d - d/10 }, func(d time.Duration) time.Duration { return d + d/10 }},
		{"clamped", Jitter{Below: 2, Above: -1},
			func(time.Duration) time.Duration { return 0 }, func(d time.Duration) time.Duration { return d }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy{First: 100 * time.Millisecond, Most: 3 * time.Second, Jitter: tc.jitter}
			exact := Policy{First: p.First, Most: p.Most}
			for n := range 40 {
				d := exact.Wait(n)
				least, most := time.Duration(math.MaxInt64), time.Duration(0)
				for range 200 {
					w := p.Wait(n)
					if w < tc.lo(d) || w > tc.hi(d) {
						t.Fatalf("Wait(%d) = %v, want %v..%v", n, w, tc.lo(d), tc.hi(d))
					}
					least, most = min(least, w), max(most, w)
				}
				if most-least < (tc.hi(d)-tc.lo(d))/2 {
					t.Errorf("Wait(%d) spread over %v..%v only, of %v..%v", n, least, most, tc.lo(d), tc.hi(d))
				}
			}
		})
	}
}

// TestJitterDoesNotOverflow: jitter above a wait near the largest duration stays positive.
func TestJitterDoesNotOverflow(t *testing.T) {
	p := Policy{First: math.MaxInt64, Most: math.MaxInt64, Jitter: Jitter{Below: 1, Above: 1}}
	for range 100 {
		if w := p.Wait(3); w < 0 {
			t.Fatalf("Wait = %v", w)
		}
	}
}
