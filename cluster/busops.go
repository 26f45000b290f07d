package cluster

import (
	"context"
	"sync"
)

// busOps runs the node's bus operations, one goroutine each, and stops them at shutdown.
type busOps struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// run starts f in a goroutine of its own, unless the node has stopped.
func (o *busOps) run(f func(ctx context.Context)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		f(o.ctx)
	}()
}

// stop cancels the operations in flight and waits for them to return.
func (o *busOps) stop() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}
