package broker

import (
	"fmt"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/backoff"
)

// Backoff is the pause before reconnection attempt n (from 1; 0 counts as 1): first, doubled
// per attempt up to most, with 20% jitter (from 0.9 to 1.1 times that) so that nodes do not
// reconnect in step.
func Backoff(first, most time.Duration, n int) time.Duration {
	return backoff.Policy{First: first, Most: most, Jitter: backoff.Jitter{Below: 0.1, Above: 0.1}}.Wait(n - 1)
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

// TimedOut is the error of an operation (what) whose context ended before the bus answered
// (a Flush under a publish timeout, on a bus or a node too busy to answer in time): code
// CodeUnavailable, so that the publisher is answered 503 and may retry (the message may
// have been sent: a retry may deliver it twice), wrapping the context's error.
func TimedOut(what string, ctxErr error) error {
	e := herald.Errorf(herald.CodeUnavailable, "the cluster bus did not answer in time, retry later")
	return fmt.Errorf("%s: %w: %w", what, e, ctxErr)
}
