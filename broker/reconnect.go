package broker

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/herald-rt/herald"
)

// Backoff is the pause before reconnection attempt n (from 1): first, doubled per attempt
// up to most, with 20% jitter so that nodes do not reconnect in step.
func Backoff(first, most time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

// Unavailable is the error of an operation (what) that could not reach the bus: code
// CodeUnavailable, wrapping err's cause when there is one.
func Unavailable(what string, err error) error {
	e := herald.Errorf(herald.CodeUnavailable, "cluster bus unavailable")
	if err != nil {
		return fmt.Errorf("%s: %w: %w", what, e, err)
	}
	return fmt.Errorf("%s: %w", what, e)
}
