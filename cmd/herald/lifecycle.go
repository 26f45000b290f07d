package main

import (
	"context"
	"errors"
	"sync"
	"time"
)

// component is one part of a running node, with a fixed lifecycle: it is configured by its
// constructor (from the validated Config, allocating only: nothing listens, connects or runs),
// then started and stopped, each at most once, by a lifecycle.
//
// start starts it; when it fails, it leaves nothing running, logs why (only it has the
// context for the log line) and returns the error. stop stops what start started, within
// ctx: once ctx is done it stops without waiting (connections still open are closed, queued
// work is dropped) and returns at once. It returns what it could not do, having logged what
// an operator needs to know of it.
type component interface {
	start() error
	stop(ctx context.Context) error
}

// alongside is a component whose stop runs at the same time as the stops of the components
// started before it, instead of before them: a stop that waits on others (the API port's
// http.Server.Shutdown waits for requests in progress) must not use up the deadline of
// those that follow.
type alongside struct{ component }

// lifecycle starts its components in order and stops them in reverse order. It is safe for
// concurrent use.
type lifecycle struct {
	components []component
	rollback   time.Duration // how long the stop of the started ones may take when a start fails

	mu      sync.Mutex
	started []component // in start order; stop empties it
}

// newLifecycle returns the lifecycle of components, in start order; rollback bounds the
// stop of those started when a later one fails to start.
func newLifecycle(rollback time.Duration, components ...component) *lifecycle {
	return &lifecycle{components: components, rollback: rollback}
}

// start starts every component in order. When one fails, it stops those already started,
// in reverse order and within the rollback deadline, and returns that start's error.
func (l *lifecycle) start() error {
	for _, c := range l.components {
		if err := c.start(); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), l.rollback)
			defer cancel()
			_ = l.stop(ctx) // each component logged its own trouble
			return err
		}
		l.mu.Lock()
		l.started = append(l.started, c)
		l.mu.Unlock()
	}
	return nil
}

// stop stops the started components in reverse order, each within ctx: the deadline is the
// whole stop's, and a component reached after it has passed is still stopped (at once). An
// alongside component's stop runs while those before it stop; stop returns when every stop
// has. It is idempotent: a second call stops nothing. It returns the stops' errors, joined.
func (l *lifecycle) stop(ctx context.Context) error {
	l.mu.Lock()
	started := l.started
	l.started = nil
	l.mu.Unlock()

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	stop := func(c component) {
		if err := c.stop(ctx); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for i := len(started) - 1; i >= 0; i-- {
		if a, ok := started[i].(alongside); ok {
			wg.Go(func() { stop(a) })
			continue
		}
		stop(started[i])
	}
	wg.Wait()
	return errors.Join(errs...)
}
