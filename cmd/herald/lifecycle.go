package main

import (
	"context"
	"errors"
	"sync"
	"time"
)

// component is one part of a running node, with a fixed lifecycle: it is configured by its
// constructor (from the validated Config, allocating only: nothing listens, connects or runs),
// then started and stopped, each at most once, by a lifecycle. Its constructor is handed
// everything it uses: configuration, values and small interfaces or funcs, and what a
// component started before it gave (see giver); never another component to reach into.
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

// giver is a component whose start gives what components after it are built with (the
// started session server, the bus link): they take it as a constructor argument, so that
// none can be built before it has started. startGiving starts it.
type giver[T any] interface {
	start() (T, error)
	stop(ctx context.Context) error
}

// alongside is a component whose stop runs at the same time as the stops of the components
// started before it, instead of before them: a stop that waits on others (the API port's
// http.Server.Shutdown waits for requests in progress) must not use up the deadline of
// those that follow.
type alongside struct{ component }

// lifecycle starts components in order, as the node's root hands them over, and stops them
// in reverse order. It is safe for concurrent use.
type lifecycle struct {
	rollback time.Duration // how long the stop of the started ones may take when a start fails

	mu      sync.Mutex
	started []component // in start order; stop empties it
}

// newLifecycle returns a lifecycle with nothing started; rollback bounds the stop of those
// started when a later one fails to start.
func newLifecycle(rollback time.Duration) *lifecycle {
	return &lifecycle{rollback: rollback}
}

// start starts cs in order, after those of earlier calls. When one fails, it stops every
// component started (those of earlier calls too), in reverse order and within the rollback
// deadline, and returns that start's error; the rest of cs never start.
func (l *lifecycle) start(cs ...component) error {
	for _, c := range cs {
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

// startGiving starts g as l's next component (see start) and returns what its start gave.
func startGiving[T any](l *lifecycle, g giver[T]) (T, error) {
	var v T
	err := l.start(giving[T]{g, &v})
	return v, err
}

// giving is a giver as a component: its start keeps what the giver's gives in v.
type giving[T any] struct {
	g giver[T]
	v *T
}

func (c giving[T]) start() (err error)             { *c.v, err = c.g.start(); return err }
func (c giving[T]) stop(ctx context.Context) error { return c.g.stop(ctx) }

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
