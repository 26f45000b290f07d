package cluster

import (
	"sync/atomic"
	"time"
)

// A node is behind when its fan-out queues stay full: a cluster node then refuses new
// publishes, and so does every node that hears it (the node record of its state stream), until
// it has caught up; a publisher is told to retry (503, Retry-After), an ingest source pauses.
// The bus's send queue pushes back by itself (Broker.Publish waits, then refuses), and a single
// node's publishes wait for room in the queues (fanout.Engine.Reserve), then are refused.
const (
	pressureEvery = 100 * time.Millisecond
	behindAbove   = 0.5  // the fullest fan-out queue's fill past which a node is behind...
	behindFor     = 5    // ...for this many samples in a row
	caughtUpBelow = 0.25 // and below which it has caught up, as long
)

// pressure samples the node's fan-out queues and says whether the node is behind.
type pressure struct {
	fill    func() float64 // the fullest queue's fill, 0 to 1
	changed func()         // called when behind changes (the stream announces it)
	behind  atomic.Bool
	over    int // samples in a row past behindAbove (or, while behind, under caughtUpBelow)
	since   atomic.Int64
	// Refused counts the publishes refused because a node was behind.
	refused atomic.Uint64
}

// sample takes one sample.
func (p *pressure) sample(now time.Time) {
	f := p.fill()
	behind := p.behind.Load()
	if behind && f < caughtUpBelow || !behind && f > behindAbove {
		p.over++
	} else {
		p.over = 0
	}
	if p.over < behindFor {
		return
	}
	p.over = 0
	p.behind.Store(!behind)
	p.since.Store(now.UnixMilli())
	if p.changed != nil {
		p.changed()
	}
}

// run samples every pressureEvery until stop is closed.
func (p *pressure) run(stop <-chan struct{}) {
	t := time.NewTicker(pressureEvery)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			p.sample(now)
		case <-stop:
			return
		}
	}
}
