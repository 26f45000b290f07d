package cluster

import (
	"context"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/backoff"
)

// Acquire implements State: a new channel's gate opens once this node's interest in it is
// on the bus; a cache channel's at once (its events reach every node, as BusCache). A history
// channel that lingered (linger.go) comes back with its gate and copy as they were.
func (r *Replicated) Acquire(a *App, name string, info herald.ChannelInfo) (*Channel, bool) {
	ch, first, revived := a.table.acquire(name, info, info.Cache)
	if first && !revived && !info.Cache {
		r.takeInterest(a, ch)
	}
	return ch, first
}

// Release implements State: the last subscription drops this node's interest, unless the
// channel lingers (linger.go), which drops it later.
func (r *Replicated) Release(a *App, ch *Channel) bool {
	last, lingers := a.table.release(ch)
	if !last {
		return false
	}
	if !ch.info.Cache && !lingers {
		r.drop(a, ch)
	}
	return true
}

// drop forgets a channel gone from the table: its copy of the history, and this node's
// interest in it on the bus.
func (r *Replicated) drop(a *App, ch *Channel) {
	if h := ch.hist; h != nil {
		h.mu.Lock()
		h.dead = true
		h.clearLocked()
		h.held = nil
		h.mu.Unlock()
	}
	g := &ch.gate
	g.mu.Lock()
	g.gone = true
	held := g.held
	g.mu.Unlock()
	if held {
		app, name := a.id, ch.name
		r.ops.run(func(ctx context.Context) { _ = r.bus.Unsubscribe(ctx, app, name) })
	}
}

// takeInterest takes this node's interest in a channel just created, then opens its gate.
// While the bus is down it retries until the bus is back, or until the channel is released
// or the node stops (then the gate never opens).
func (r *Replicated) takeInterest(a *App, ch *Channel) {
	r.ops.run(func(ctx context.Context) {
		app, name, g := a.id, ch.name, &ch.gate
		err := r.bus.Subscribe(ctx, app, name)
		for n := 0; err != nil; n++ {
			// The reference taken above is kept and restored by the engine when the bus
			// returns; an extra one, taken and dropped, tells when it is confirmed.
			select {
			case <-time.After(retry.Wait(n)):
			case <-ctx.Done():
			}
			g.mu.Lock()
			gone := g.gone || ctx.Err() != nil
			g.mu.Unlock()
			if gone {
				break
			}
			err = r.bus.Subscribe(ctx, app, name)
			_ = r.bus.Unsubscribe(ctx, app, name)
		}
		g.mu.Lock()
		g.held = true
		gone := g.gone
		g.mu.Unlock()
		if gone {
			_ = r.bus.Unsubscribe(ctx, app, name)
			return
		}
		switch {
		case err != nil:
		case ch.hist != nil:
			r.load(ctx, a, ch, g.open)
		default:
			g.open()
		}
	})
}

// retry is the pause between attempts to take an interest while the bus is down: from 50 ms
// doubling to 1 s, 10 % jitter either way.
var retry = backoff.Policy{First: 50 * time.Millisecond, Most: time.Second, Jitter: backoff.Jitter{Below: 0.1, Above: 0.1}}
