package nats

import (
	"context"
	"errors"
	"time"
)

// tries is how many times retry tries a request within its deadline.
const tries = 3

// retry makes a JetStream request that may be made again (a read, a creation that is
// idempotent) up to tries times, each try given an equal share of what is left of ctx,
// while a try goes unanswered. On a cluster of nats-server 2.9 a request can go unanswered
// where the next is answered at once: one to a server killed a moment ago that JetStream
// still believes up, or one of two nodes creating one stream at the same moment (the
// history conformance suite's ConcurrentNodes on three servers).
func retry[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	for try := 1; ; try++ {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok && try < tries {
			tctx, cancel = context.WithTimeout(ctx, time.Until(dl)/time.Duration(tries-try+1))
		}
		v, err := f(tctx)
		cancel()
		if err == nil || try >= tries || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return v, err
		}
	}
}
