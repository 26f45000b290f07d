package broker

import (
	"context"
	"errors"
)

// Round is one round trip to the bus that Flush calls wait for: the goroutine that makes it
// calls End once, and any number of callers Wait for its result.
type Round struct {
	done chan struct{}
	err  error
}

// NewRound returns a round trip not yet made.
func NewRound() *Round { return &Round{done: make(chan struct{})} }

// End records the result of the round trip and wakes its waiters. It is called once.
func (r *Round) End(err error) {
	r.err = err
	close(r.done)
}

// Wait returns the round trip's result once End was called. When ctx is done first it
// returns TimedOut's CodeUnavailable error, and when stop (the broker's, closed by Close) is
// closed first a CodeUnavailable error: the round trip may never be made. what names the
// operation.
func (r *Round) Wait(ctx context.Context, stop <-chan struct{}, what string) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return TimedOut(what, ctx.Err())
	case <-stop:
		select {
		case <-r.done:
			return r.err
		default:
			return Unavailable(what, errors.New("broker closed"))
		}
	}
}
