package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/herald-rt/herald/internal/backoff"
)

// Lifecycle is what every Source does the same way: Start runs the source's goroutines once,
// Close stops them and waits for them within its deadline, Stats is the pipeline's. A source
// embeds the one NewLifecycle gives it.
type Lifecycle struct {
	p      *Pipeline
	cancel context.CancelFunc
	loops  []func()
	closed func()
	wg     sync.WaitGroup
	start  sync.Once
	close  sync.Once
}

// NewLifecycle returns the lifecycle of p's source and the context its goroutines run in:
// loops are the goroutines Start runs, each until ctx is done (Close); closed, when not nil,
// runs once they have all returned, to release what they used.
func NewLifecycle(p *Pipeline, closed func(), loops ...func()) (*Lifecycle, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	if p.rc != nil { // hands off again what a replaced bus connection may have lost (resend.go)
		loops = append(loops[:len(loops):len(loops)], func() { p.watch(ctx) })
	}
	return &Lifecycle{p: p, cancel: cancel, loops: loops, closed: closed}, ctx
}

// Start runs the source's goroutines; it does nothing the second time.
func (l *Lifecycle) Start() {
	l.start.Do(func() {
		l.wg.Add(len(l.loops))
		for _, f := range l.loops {
			go func() { defer l.wg.Done(); f() }()
		}
	})
}

// Close cancels the goroutines' context and waits within ctx for them to return (and for
// closed); the source is stopped then. Close is idempotent.
func (l *Lifecycle) Close(ctx context.Context) error {
	l.close.Do(func() {
		l.cancel()
		done := make(chan struct{})
		go func() {
			l.wg.Wait()
			if l.closed != nil {
				l.closed()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
		}
		l.p.SetState(StateStopped, nil)
	})
	return ctx.Err()
}

// Stats is the pipeline's.
func (l *Lifecycle) Stats() Stats { return l.p.Stats() }

// Backoff is the wait before the n-th attempt (from 0) to reach an unreachable broker
// again: 100 ms doubling to 5 s, without jitter.
func Backoff(n int) time.Duration { return reconnect.Wait(n) }

var reconnect = backoff.Policy{First: 100 * time.Millisecond, Most: 5 * time.Second}
