package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/backoff"
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

// receiveEvent delivers an event another node (or this one) published to this node's
// subscribers of its channel, except the socket it excludes (when that socket is here).
// Messages of unknown apps, and for channels nobody here subscribes to any more, are
// ignored. Cache channels' events come as BusCache.
func (r *Replicated) receiveEvent(msg herald.BusMessage) {
	if !r.validFrame(msg.Payload) {
		return
	}
	a := r.app(msg.App)
	if a == nil {
		return
	}
	if msg.Offset != 0 {
		r.receiveHistory(a, msg)
		return
	}
	if msg.Key != "" && r.received.repeat(a.id, msg.Channel, msg.Key, time.Now()) {
		return // delivered when its key first came
	}
	// Events of channels without history wait in the batch for the bus to drain; a history
	// channel's are delivered at once, in the order its history lock gives them with
	// replays and repairs.
	ch := a.table.lookup(msg.Channel)
	if ch != nil && ch.hist == nil && (r.copies || len(a.hist.rules()) == 0) {
		r.batch.Add(&ch.Channel, msg.Payload, r.eng.Local(msg.ExcludeSocket), a.group.Measure(msg.Origin))
		return
	}
	r.deliver(a, msg.Channel, false, msg.Payload, r.eng.Local(msg.ExcludeSocket), nil, msg.Origin)
}

// receiveCache keeps and delivers a cache channel's event.
func (r *Replicated) receiveCache(msg herald.BusMessage) {
	rd := stateReader{b: msg.Payload}
	app, channel := rd.string(), rd.string()
	if a := r.app(app); a != nil && rd.err == nil && herald.Classify(channel).Cache && r.validFrame(rd.b) {
		r.deliver(a, channel, true, rd.b, r.eng.Local(msg.ExcludeSocket), nil, msg.Origin)
		r.echo.arrived(app, channel, rd.b)
	}
}

// validFrame reports whether frame may be queued for subscribers (Config.ValidFrame).
func (r *Replicated) validFrame(frame []byte) bool {
	return r.cfg.ValidFrame == nil || r.cfg.ValidFrame(frame)
}

// read reads a channel's history from the bus's store, its entries checked as the bus's
// events are (Config.ValidFrame): a refused entry is left out, and lost is the last offset
// refused (0: none). The page's Through is set (herald.HistoryPage); full says the store
// returned limit entries, refused ones included: there may be more.
func (r *Replicated) read(ctx context.Context, rule herald.HistoryRule, app, channel string, after uint64, limit int) (page herald.HistoryPage, full bool, lost uint64, err error) {
	page, err = r.hist.Read(ctx, rule, app, channel, after, limit)
	if err != nil {
		return page, false, 0, err
	}
	full = len(page.Entries) >= limit
	page.Through = page.Latest.Offset
	if full {
		page.Through = page.Entries[len(page.Entries)-1].Offset
	}
	if r.cfg.ValidFrame == nil {
		return page, full, 0, nil
	}
	out := page.Entries[:0]
	for _, e := range page.Entries {
		if !r.cfg.ValidFrame(e.Frame) {
			lost = max(lost, e.Offset)
			continue
		}
		out = append(out, e)
	}
	page.Entries = out
	return page, full, lost, nil
}

// receiveState applies the other nodes' state.
func (r *Replicated) receiveState(msg herald.BusMessage) { r.stream.receive(msg.Node, msg.Payload) }

// receiveTerminate closes a user's connections here.
func (r *Replicated) receiveTerminate(msg herald.BusMessage) {
	rd := stateReader{b: msg.Payload}
	app, user := rd.string(), rd.string()
	if rd.err == nil && r.app(app) != nil {
		r.l.Terminate(app, user)
	}
}

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

// Publish implements State, as PublishBatch.
func (r *Replicated) Publish(a *App, ev herald.Event, frame []byte) error {
	evs, frames := [1]herald.Event{ev}, [1][]byte{frame}
	return r.PublishBatch(a, evs[:], frames[:])
}

// PublishBatch implements State: it sends the frames of evs through the bus to every node with
// interest in their channels, this one included, so every node delivers one channel's
// events in the one order the bus gave them; then it waits until the bus has them (Flush),
// so that a publisher whose next event goes to another node keeps its order there too. It
// fails at once with a CodeUnavailable error when the bus is known to be down (nothing was
// sent); a later error means the events before it were handed to the bus (the caller
// answers 503): a retry delivers those again unless they carry idempotency keys, which the
// history store keeps across nodes and this node's keys remember (docs/guarantees.md). An event of a cache channel is
// answered once it is back from the bus and kept here (echoes), so that a subscriber who
// joins this node after the answer gets it replayed; waiting for that is bounded by the
// publish timeout, after which the answer is given all the same (the bus has the event).
//
// Local subscribers are served from the bus like the others: the fan-out queues push back on
// the broker's delivery, not on the publisher, who is refused only when the bus is.
func (r *Replicated) PublishBatch(a *App, evs []herald.Event, frames [][]byte) (err error) {
	if !r.bus.Connected() {
		return herald.Errorf(herald.CodeUnavailable, "the cluster bus is unreachable, retry later")
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.PublishTimeout)
	defer cancel()
	if err := r.behind(); err != nil {
		return err
	}
	skip, held, err := r.keys.claim(r.cfg.PublishTimeout, a.id, evs)
	if err != nil {
		return err
	}
	defer func() {
		err = unkept(err)
		if held != nil {
			r.keys.settle(a.id, held, err == nil)
		}
	}()
	if skip != nil {
		evs, frames = unskipped(evs, frames, skip)
	}
	var waits []*echoWait
	var groups []int // bundle.go: the events sent in bundles, while every node reads them
	if len(evs) > 1 && r.bundling() {
		groups = r.bundleGroups(a, evs)
	}
	for i := range evs {
		ev := &evs[i]
		if groups != nil && groups[i] >= 0 {
			if groups[i] != i {
				continue // sent in its channel's bundle, with the first
			}
			if err := r.publishBundle(ctx, a, evs, frames, groups, i); err != nil {
				return err
			}
			continue
		}
		cache := herald.Classify(ev.Channel).Cache
		if cache {
			waits = append(waits, r.echo.expect(a.id, ev.Channel, frames[i]))
		}
		msg := busEvent(a.id, ev.Channel, cache, ev.SocketID, frames[i], ev.OriginNanos())
		rule, kept := a.hist.rule(ev.Channel)
		kept = kept && r.hist != nil
		if kept || !cache && r.Features()&FeatureKeys != 0 {
			msg.Key = ev.Key // the store keeps it once, or every node reads it (received.go)
		}
		if kept {
			_, err = r.hist.Publish(ctx, rule, msg)
		} else {
			err = r.bus.Publish(ctx, msg)
		}
		if err != nil {
			r.echo.cancel(waits)
			return err
		}
	}
	if err := r.bus.Flush(ctx); err != nil {
		r.echo.cancel(waits)
		return err
	}
	if len(waits) > 0 && !r.echo.wait(waits, r.cfg.PublishTimeout) {
		r.log.Debug("cluster: a cache-channel event came back from the bus after its publish was answered", "app_id", a.id)
	}
	return nil
}

// KeyStats implements State: the node's keys, and the repeats it received.
func (r *Replicated) KeyStats() KeyStats {
	st := r.keys.stats()
	st.Received = r.received.repeats.Load()
	st.Evicted += r.received.evicted.Load()
	return st
}

// behind is the refusal of a publish while this node or another live one is behind
// (pressure.go): nil when none is.
func (r *Replicated) behind() error {
	if r.press.behind.Load() {
		r.press.refused.Add(1)
		return herald.Errorf(herald.CodeBusy, "this node cannot keep up with the events it receives (its fan-out queues are full): retry later")
	}
	if name := r.stream.behindPeer(); name != nil {
		r.press.refused.Add(1)
		return herald.Errorf(herald.CodeBusy, "node %s cannot keep up with the events it receives (its fan-out queues are full): retry later", *name)
	}
	return nil
}

// unkept is the error of a publish that the bus did not confirm: every failure is one the
// publisher may retry (CodeBusy, CodeUnavailable), or one it must not (an event too large),
// never an internal error for a deadline the bus let pass.
func unkept(err error) error {
	if err == nil || herald.CodeOf(err) != herald.CodeInternal {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", herald.Errorf(herald.CodeBusy, "the cluster bus did not confirm the publish within the publish timeout, retry later"), err)
	}
	return fmt.Errorf("%w: %w", herald.Errorf(herald.CodeUnavailable, "the cluster bus failed the publish, retry later"), err)
}

// unskipped returns the events of evs, and their frames, that skip does not mark.
func unskipped(evs []herald.Event, frames [][]byte, skip []bool) ([]herald.Event, [][]byte) {
	var e []herald.Event
	var f [][]byte
	for i := range evs {
		if !skip[i] {
			e, f = append(e, evs[i]), append(f, frames[i])
		}
	}
	return e, f
}

// Forward implements State: the frame goes through the bus, to this node's subscribers too.
// Client events are never refused: while the bus is down, this node's subscribers get it.
func (r *Replicated) Forward(a *App, channel string, from *fanout.Conn, frame []byte) {
	cache := herald.Classify(channel).Cache
	if r.bus.Connected() && r.bus.Publish(context.Background(), busEvent(a.id, channel, cache, from.ID(), frame, 0)) == nil {
		return // delivered here too when the bus brings it back
	}
	r.deliver(a, channel, cache, frame, from.Num(), nil, 0)
}

// Terminate implements State: every node closes the connections of the signed-in user.
func (r *Replicated) Terminate(a *App, user string) {
	p := appendString(appendString(nil, a.id), user)
	_ = r.bus.Publish(context.Background(), herald.BusMessage{Kind: herald.BusTerminate, Channel: controlKey, Payload: p})
}

// busEvent is the bus message of an event's frame: to the nodes with interest in its
// channel or, for a cache channel, to every node, so that each keeps it as the channel's
// last event. origin (Unix nanoseconds, 0: none) travels with it, so that each node that
// delivers it observes origin → its frames queued.
func busEvent(app, channel string, cache bool, exclude string, frame []byte, origin int64) herald.BusMessage {
	if cache {
		p := appendString(appendString(make([]byte, 0, len(app)+len(channel)+4+len(frame)), app), channel)
		return herald.BusMessage{Kind: herald.BusCache, Channel: cacheKey, ExcludeSocket: exclude, Origin: origin, Payload: append(p, frame...)}
	}
	return herald.BusMessage{Kind: herald.BusEvent, App: app, Channel: channel, ExcludeSocket: exclude, Origin: origin, Payload: frame}
}

// retry is the pause between attempts to take an interest while the bus is down: from 50 ms
// doubling to 1 s, 10 % jitter either way.
var retry = backoff.Policy{First: 50 * time.Millisecond, Most: time.Second, Jitter: backoff.Jitter{Below: 0.1, Above: 0.1}}

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

// ReplicatedState returns how to build a cluster node's State on the node's engine (see
// NewReplicated): what session.New takes.
func ReplicatedState(cfg Config, bus herald.Broker, hist herald.History, handle Handler, log *slog.Logger) func(*fanout.Engine) State {
	return func(eng *fanout.Engine) State { return NewReplicated(cfg, eng, bus, hist, handle, log) }
}

// History implements State: the bus's store has the channel's events.
func (r *Replicated) History(ctx context.Context, a *App, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	rule, ok := a.hist.rule(channel)
	if !ok || r.hist == nil {
		return herald.HistoryPage{}, herald.Errorf(herald.CodeNotFound, "channel %s keeps no history", channel)
	}
	page, _, _, err := r.read(ctx, rule, a.id, channel, after, limit)
	return page, err
}
