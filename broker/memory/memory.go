package memory

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
)

var _ herald.Broker = (*Broker)(nil)

// Bus connects the Brokers attached to it. The zero value is not usable; call NewBus.
type Bus struct {
	mu      sync.RWMutex
	subs    map[broker.Key][]*Broker // copied on write: Publish reads it under the read lock only
	history *store                   // the channel histories of every node's History (NewHistory)
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[broker.Key][]*Broker{}, history: newStore()} }

// Config configures one node's Broker. Zero values mean the defaults noted.
type Config struct {
	NodeID    string // default "memory"
	QueueSize int    // received messages queued for the handler; default broker.DefaultQueueSize
	// KeyWindow is how long the node's History remembers an idempotency key; default
	// herald.DefaultKeyWindow.
	KeyWindow time.Duration
}

// Broker is one node's attachment to a Bus.
type Broker struct {
	bus       *Bus
	node      string
	keyWindow time.Duration
	handler   herald.BusHandler
	interests *broker.Interests
	inbox     chan herald.BusMessage
	ctl       chan herald.BusMessage // internal keys' messages (app id "")
	stop      chan struct{}
	done      chan struct{}
	closing   sync.Once
	closed    atomic.Bool

	count broker.Counters
	lost  broker.Losses
}

// New returns a Broker on a Bus of its own, with no other node: for a test that needs one
// Broker.
func New(cfg Config, h herald.BusHandler) *Broker { return NewBus().Attach(cfg, h) }

// Attach connects a new node to the bus; h receives what other nodes publish for the
// channels it subscribes to.
func (bus *Bus) Attach(cfg Config, h herald.BusHandler) *Broker {
	if cfg.NodeID == "" {
		cfg.NodeID = "memory"
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = broker.DefaultQueueSize
	}
	if cfg.KeyWindow <= 0 {
		cfg.KeyWindow = herald.DefaultKeyWindow
	}
	b := &Broker{bus: bus, node: cfg.NodeID, keyWindow: cfg.KeyWindow, handler: h, inbox: make(chan herald.BusMessage, cfg.QueueSize),
		ctl: make(chan herald.BusMessage, cfg.QueueSize), stop: make(chan struct{}), done: make(chan struct{})}
	b.interests = broker.NewInterests(b.attach, b.detach)
	go b.run()
	return b
}

func (b *Broker) run() {
	defer close(b.done)
	broker.Deliver(b.ctl, b.inbox, b.stop, func(m herald.BusMessage) {
		b.count.CountReceived(broker.EncodedSize(m))
		b.handler(m)
	}, func() { broker.Drained(b.handler) })
}

func (b *Broker) attach(_ context.Context, k broker.Key) error {
	if b.closed.Load() {
		return herald.Errorf(herald.CodeUnavailable, "cluster bus: broker closed")
	}
	bus := b.bus
	bus.mu.Lock()
	defer bus.mu.Unlock()
	old := bus.subs[k]
	for _, x := range old {
		if x == b {
			return nil
		}
	}
	bus.subs[k] = append(old[:len(old):len(old)], b)
	return nil
}

func (b *Broker) detach(_ context.Context, k broker.Key) error {
	bus := b.bus
	bus.mu.Lock()
	defer bus.mu.Unlock()
	old := bus.subs[k]
	list := make([]*Broker, 0, len(old))
	for _, x := range old {
		if x != b {
			list = append(list, x)
		}
	}
	if len(list) == 0 {
		delete(bus.subs, k)
	} else {
		bus.subs[k] = list
	}
	return nil
}

// Publish implements herald.Broker. A receiver whose queue is full drops msg and counts it.
func (b *Broker) Publish(_ context.Context, msg herald.BusMessage) error {
	if b.closed.Load() {
		b.count.PublishErrors.Add(1)
		return herald.Errorf(herald.CodeUnavailable, "cluster bus: broker closed")
	}
	msg.Node = b.node
	b.count.CountSent(broker.EncodedSize(msg))
	bus := b.bus
	bus.mu.RLock()
	list := bus.subs[broker.Key{App: msg.App, Channel: msg.Channel}]
	bus.mu.RUnlock()
	for _, r := range list {
		q := r.inbox
		if msg.App == "" {
			q = r.ctl
		}
		select {
		case q <- msg:
		default:
			r.count.Dropped.Add(1)
			r.lost.Add(broker.Key{App: msg.App, Channel: msg.Channel})
		}
	}
	return nil
}

// Losses calls f with each (app, channel) whose received messages this node dropped since
// the last call, its queue full; false (f not called) when too many did to remember.
func (b *Broker) Losses(f func(app, channel string)) bool { return b.lost.Take(f) }

// Flush implements herald.Broker. Publish puts its message in every receiving node's queue
// before it returns, and each node's goroutine drains its queue in order, so whatever any
// node publishes later is queued behind it: there is nothing to wait for.
func (b *Broker) Flush(context.Context) error {
	if b.closed.Load() {
		return herald.Errorf(herald.CodeUnavailable, "cluster bus: broker closed")
	}
	return nil
}

// Subscribe implements herald.Broker.
func (b *Broker) Subscribe(ctx context.Context, app, channel string) error {
	return b.interests.Acquire(ctx, broker.Key{App: app, Channel: channel})
}

// Unsubscribe implements herald.Broker.
func (b *Broker) Unsubscribe(ctx context.Context, app, channel string) error {
	return b.interests.Release(ctx, broker.Key{App: app, Channel: channel})
}

// Connected implements herald.Broker: true until Close.
func (b *Broker) Connected() bool { return !b.closed.Load() }

// Stats implements herald.Broker.
func (b *Broker) Stats() herald.BrokerStats {
	st := b.count.Stats()
	st.Connected, st.Interests = b.Connected(), b.interests.Len()
	st.Queued, st.QueueCap = len(b.inbox)+len(b.ctl), cap(b.inbox)+cap(b.ctl)
	return st
}

// Close implements herald.Broker: it detaches the node from the bus and stops its goroutine.
func (b *Broker) Close(ctx context.Context) error {
	b.closing.Do(func() {
		b.closed.Store(true)
		for _, k := range b.interests.Keys() {
			_ = b.detach(ctx, k)
		}
		close(b.stop)
	})
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
