package console

import (
	"context"
	"encoding/json"
	"time"

	"github.com/herald-rt/herald"
)

// peers is the console's tie to the other nodes' consoles: the bus (onBus) or, on a node
// without one, nothing (alone).
type peers interface {
	// join registers receive for the other consoles' figures and takes interest in them,
	// until the leave it returns.
	join(ctx context.Context, receive herald.BusHandler) (leave func())
	// share sends this node's figures to the other consoles, within timeout.
	share(ctx context.Context, timeout time.Duration, figures *nodeStats)
}

// peersOf is the console's peers as cfg gives them: the bus when set, else none.
func peersOf(cfg Config) peers {
	if cfg.Bus == nil {
		return alone{}
	}
	b := onBus{bus: cfg.Bus, route: cfg.Route}
	if b.route == nil { // share, hear nothing
		b.route = func(herald.BusKind, herald.BusHandler) {}
	}
	return b
}

// alone is a node without a bus: no other console to hear or tell.
type alone struct{}

func (alone) join(context.Context, herald.BusHandler) func()   { return func() {} }
func (alone) share(context.Context, time.Duration, *nodeStats) {}

// onBus shares the figures over the bus on busChannel, its messages of BusKind routed by
// route.
type onBus struct {
	bus   herald.Broker
	route func(kind herald.BusKind, h herald.BusHandler)
}

func (b onBus) join(ctx context.Context, receive herald.BusHandler) func() {
	b.route(BusKind, receive)
	// The reference is kept even when this fails: the engine restores the interest.
	_ = b.bus.Subscribe(ctx, "", busChannel)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = b.bus.Unsubscribe(ctx, "", busChannel)
		b.route(BusKind, nil)
	}
}

func (b onBus) share(ctx context.Context, timeout time.Duration, figures *nodeStats) {
	if !b.bus.Connected() {
		return
	}
	p, err := json.Marshal(figures)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_ = b.bus.Publish(ctx, herald.BusMessage{Kind: BusKind, Channel: busChannel, Payload: p})
}
