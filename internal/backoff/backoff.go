package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff. The zero value waits nothing.
type Policy struct {
	First  time.Duration // the wait before the first retry (n = 0), before jitter
	Most   time.Duration // the longest wait before jitter; it caps First too
	Jitter Jitter
}

// Jitter spreads waits: a wait of d becomes a uniformly random one from d − Below×d to
// d + Above×d. Below and Above are fractions from 0 to 1 (values outside are clamped); the
// zero Jitter leaves d as it is. Jitter{Below: 0.5} takes a random part of the second half
// off (d/2 to d); Jitter{Below: 0.1, Above: 0.1} spreads waits over 20 % around d.
type Jitter struct{ Below, Above float64 }

// Wait returns the pause before retry n (from 0; below 0 counts as 0): First × 2ⁿ, at most
// Most, then jittered.
func (p Policy) Wait(n int) time.Duration {
	d := p.First
	for ; n > 0 && d > 0 && d < p.Most; n-- {
		if d > p.Most/2 { // doubling would pass Most (or overflow)
			d = p.Most
			break
		}
		d *= 2
	}
	return p.Jitter.apply(max(min(d, p.Most), 0))
}

// apply returns a random wait in d's range.
func (j Jitter) apply(d time.Duration) time.Duration {
	if d == 0 || j == (Jitter{}) {
		return d
	}
	frac := func(f float64) time.Duration { // f×d, at most d
		if x := float64(d) * min(max(f, 0), 1); x < float64(d) {
			return time.Duration(x)
		}
		return d
	}
	lo, hi := d-frac(j.Below), d+frac(j.Above)
	if hi < d { // overflow
		hi = math.MaxInt64
	}
	if span := hi - lo; span > 0 && span < math.MaxInt64 {
		lo += rand.N(span + 1)
	}
	return lo
}
