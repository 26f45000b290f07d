package cluster

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// Replicated is the State of a node of a cluster on a bus (herald.Broker):
//
//   - a channel's first local subscriber takes this node's interest in it on the bus, and
//     its gate opens only once the bus has it, so no subscriber misses an event another node
//     publishes after its subscription_succeeded; its last local subscriber leaving drops
//     the interest;
//   - every publish goes to the bus, which brings it back to every node with interest, this
//     one included, so all nodes deliver one channel's events in the one order the bus gave
//     them;
//   - each node streams its share of the state to the others (stream.go).
//
// Its methods are in files by what they do: its interest in channels
// (replicated_interest.go), a publish (replicated_publish.go), what it receives from the bus
// (replicated_receive.go), its copies of history channels' histories (history_sequence.go,
// history_read.go), the bus's losses (losses.go), lingering channels (linger.go), its nodes
// and features (features.go).
type Replicated struct {
	node
	bus     herald.Broker
	hist    herald.History // the bus's store of history channels' events; nil: none
	log     *slog.Logger
	ops     busOps
	stream  *stream
	echo    echoes // cache-channel publishes waiting for the bus to bring them back
	bundles bundleStats
	// batch holds the events of channels without history received since the bus last
	// drained (herald.BusDrained), so each connection gets them in one write. Only the bus's
	// delivery goroutine touches it.
	batch *fanout.Batch
	// started is set once Start ran: an app added later asks the others for their shares.
	started atomic.Bool
	// press says whether this node is behind (pressure.go).
	press pressure
	// received is the keys of the events of channels without history received (received.go).
	received *received
}

var _ State = (*Replicated)(nil)

// Handler is how a bus hands a node the messages of one kind (broker.Mux.Handle).
type Handler func(kind herald.BusKind, h herald.BusHandler)

// NewReplicated returns the State of a cluster node delivering through eng, on bus, whose
// received messages of the node's kinds (BusEvent, BusState, BusCache, BusTerminate) handle
// routes here. hist is the bus's store of history channels' events; every bus cmd/herald
// builds has one (nil: each node keeps its own history of what it delivers, as a single node
// does, and their positions do not agree: for tests only).
func NewReplicated(cfg Config, eng *fanout.Engine, bus herald.Broker, hist herald.History, handle Handler, log *slog.Logger) *Replicated {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Replicated{node: newNode(cfg, eng), bus: bus, hist: hist, log: log, batch: eng.NewBatch()}
	r.received = newReceived(r.cfg.KeyWindow, r.cfg.MaxKeys)
	r.copies = hist != nil
	r.ops.ctx, r.ops.cancel = context.WithCancel(context.Background())
	r.stream = newStream(streamConfig{bus: bus, apps: &r.apps, now: eng.Now, behind: r.press.behind.Load, log: log,
		heartbeat: r.cfg.Heartbeat, timeout: r.cfg.NodeTimeout, release: r.cfg.Release})
	r.others = r.stream
	r.press.fill = eng.Fill
	r.press.changed = r.stream.announce
	handle(herald.BusEvent, r.receiveEvent)
	handle(herald.BusState, r.receiveState)
	handle(herald.BusCache, r.receiveCache)
	handle(herald.BusTerminate, r.receiveTerminate)
	handle(herald.BusDrained, func(herald.BusMessage) { r.batch.Send() })
	handle(herald.BusBundle, r.receiveBundle)
	return r
}

// Internal bus keys (app id ""): every node has interest in them.
const (
	cacheKey   = "cache"   // BusCache: cache channels' events, kept by every node
	controlKey = "control" // BusTerminate
)

// Start implements State: it takes the node's interest in the internal keys and starts the
// state stream.
func (r *Replicated) Start(l Listener) {
	r.start(l)
	r.stream.listen(l)
	// Before any client or publish: kept by the engine, and restored when the bus comes
	// back, even when the bus is unreachable now.
	ctx, cancel := context.WithTimeout(r.ops.ctx, 5*time.Second)
	for _, k := range []string{stateKey, cacheKey, controlKey} {
		_ = r.bus.Subscribe(ctx, "", k)
	}
	cancel()
	r.ops.run(r.stream.run)
	r.ops.run(r.watchLosses)
	r.ops.run(r.expireLingering)
	r.ops.run(func(ctx context.Context) { r.press.run(ctx.Done()) })
	r.started.Store(true)
}

// AddApp implements State. An app added while the node runs (created since it started, or
// found by its app store's poll) may already have members and subscribers on the other nodes,
// whose records this node dropped not knowing the app: it asks every node for its share.
func (r *Replicated) AddApp(id string, g *fanout.Group, rules []herald.HistoryRule) *App {
	a := r.node.AddApp(id, g, rules)
	if r.started.Load() {
		r.stream.askAll()
	}
	return a
}

// Stop implements State: the stream says goodbye, the bus operations in flight end.
func (r *Replicated) Stop(context.Context) {
	r.ops.stop()
	r.halt()
}

// KeyStats implements State: the node's keys, and the repeats it received.
func (r *Replicated) KeyStats() KeyStats {
	st := r.keys.stats()
	st.Received = r.received.repeats.Load()
	st.Evicted += r.received.evicted.Load()
	return st
}

// ReplicatedState returns how to build a cluster node's State on the node's engine (see
// NewReplicated): what session.New takes.
func ReplicatedState(cfg Config, bus herald.Broker, hist herald.History, handle Handler, log *slog.Logger) func(*fanout.Engine) State {
	return func(eng *fanout.Engine) State { return NewReplicated(cfg, eng, bus, hist, handle, log) }
}
