package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/nats-io/nats.go"
)

var _ herald.Broker = (*Broker)(nil)

// Config configures a NATS broker. Zero values mean the defaults noted; without RoundTrip
// the connection is not probed.
type Config struct {
	// URL is nats://host:port, or tls://host:port for TLS; required. Several servers of one
	// NATS cluster are comma-separated: the node connects to the first that answers, in the
	// order given, and learns the cluster's other servers from it (Servers). A user and
	// password (nats://user:password@host) or a token (nats://token@host) in it authenticate
	// the node. Common.TLS, when set, configures TLS (and requires it of a nats:// server too).
	URL string
	broker.Common

	// CredsFile (a .creds file: a user JWT and its nkey seed, for a server with decentralized
	// auth) or NKeySeedFile (a file holding an nkey user's seed) authenticate the node;
	// empty: neither.
	CredsFile, NKeySeedFile string

	// PingInterval and PingsOutstanding are the connection's keepalive (see PingInterval,
	// the constant): a PING every PingInterval, the connection given up as stale when
	// PingsOutstanding of them are unanswered. 0 means the default; negative is an error.
	PingInterval     time.Duration
	PingsOutstanding int

	// HistoryReplicas is the replicas of the JetStream streams a History creates, from 1 to
	// MaxHistoryReplicas (at most the JetStream servers of the cluster); 0 means 1. More
	// than 1 keeps a history through the loss of a server (see History).
	HistoryReplicas int
}

// Broker is one node's connection to a NATS bus.
type Broker struct {
	cfg       Config
	auth      *broker.Auth // nil: messages travel unsealed
	handler   herald.BusHandler
	nc        *nats.Conn
	in        chan *nats.Msg
	ctl       chan *nats.Msg // internal keys' messages (app id "")
	interests *broker.Interests

	mu          sync.Mutex
	subs        map[broker.Key]*nats.Subscription
	lostDropped uint64             // drops counted by subscriptions since removed
	seenDropped map[broker.Key]int // each subscription's drops as Losses last saw them
	slowUntil   atomic.Int64       // Unix ms until which Losses looks at every subscription: nats.go reported a slow consumer

	flushMu sync.Mutex    // a leaf, held only to read or swap next
	next    *broker.Round // the round trip that Flush calls arriving now wait for; nil: none yet
	kick    chan struct{} // tells the flusher that next is waiting (capacity 1)

	stop    chan struct{}
	wg      sync.WaitGroup
	closing sync.Once
	closed  atomic.Bool

	count broker.Counters
	lost  broker.Losses // keys whose drops were seen when their subscription went
}

// New connects to the NATS bus. It returns at once even when the server is unreachable:
// the broker then reports not connected and keeps trying.
func New(cfg Config, h herald.BusHandler) (*Broker, error) {
	cfg.Common = cfg.WithDefaults()
	if err := cfg.Check("nats", cfg.URL); err != nil {
		return nil, err
	}
	auth, err := cfg.NewAuth("nats")
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, auth: auth, handler: h, in: make(chan *nats.Msg, cfg.QueueSize), ctl: make(chan *nats.Msg, cfg.QueueSize),
		subs: map[broker.Key]*nats.Subscription{}, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	b.interests = broker.NewInterests(b.sub, b.unsub)
	if cfg.PingInterval < 0 || cfg.PingsOutstanding < 0 {
		return nil, fmt.Errorf("nats broker: ping interval %v, pings outstanding %d: want 0 (the default) or more", cfg.PingInterval, cfg.PingsOutstanding)
	}
	if cfg.HistoryReplicas < 0 || cfg.HistoryReplicas > MaxHistoryReplicas {
		return nil, fmt.Errorf("nats broker: history replicas %d: want 0 (1) to %d", cfg.HistoryReplicas, MaxHistoryReplicas)
	}
	log := cfg.Logger.With("bus", "nats", "url", broker.RedactURL(cfg.URL))
	var failing atomic.Bool // a connection attempt failed since the last success: warned once
	opts := []nats.Option{
		nats.Name("herald " + cfg.NodeID),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(cfg.Reconnect),
		nats.Timeout(cfg.Timeout),
		nats.PingInterval(cmp.Or(cfg.PingInterval, PingInterval)),
		nats.MaxPingsOutstanding(cmp.Or(cfg.PingsOutstanding, MaxPingsOutstanding)),
		nats.ConnectHandler(func(nc *nats.Conn) {
			failing.Store(false)
			log.Info("cluster bus connected", server(nc)...)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if !failing.Swap(true) && !b.closed.Load() { // once per outage: attempts never stop
				log.Warn("cluster bus unreachable; retrying", "err", err)
			}
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			b.interests.Unconfirm()
			if !b.closed.Load() {
				log.Warn("cluster bus disconnected; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			failing.Store(false)
			b.count.Reconnects.Add(1)
			log.Info("cluster bus reconnected", append(server(nc), "interests", b.interests.Len())...)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				// Once per episode (nats.go reports the first drop after a delivery): look
				// for the subscriptions that drop for a while.
				b.slowUntil.Store(time.Now().Add(10 * time.Second).UnixMilli())
				log.Warn("cluster bus: handler queue full, dropping messages", "queue", cfg.QueueSize)
				return
			}
			log.Warn("cluster bus error", "err", err)
		}),
	}
	if cfg.TLS != nil {
		opts = append(opts, nats.Secure(cfg.TLS))
	}
	switch {
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats broker: nkey seed: %w", err)
		}
		opts = append(opts, o)
	}
	nc, err := connect(cfg.URL, opts)
	if err != nil {
		return nil, fmt.Errorf("nats broker: connect: %w", err)
	}
	b.nc = nc
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		broker.Deliver(b.ctl, b.in, b.stop, func(m *nats.Msg) { b.count.Receive(m.Data, b.auth, b.handler) },
			func() { broker.Drained(b.handler) })
	}()
	go b.flusher()
	if cfg.RoundTrip != nil {
		b.wg.Add(1)
		go b.probe()
	}
	return b, nil
}

func (b *Broker) probe() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if rtt, err := b.nc.RTT(); err == nil {
				b.cfg.RoundTrip(rtt)
			}
		case <-b.stop:
			return
		}
	}
}

// flusher makes the round trips Flush waits for, one at a time: each answers every Flush
// that joined it before it began, and the callers arriving meanwhile join the next one.
func (b *Broker) flusher() {
	defer b.wg.Done()
	for {
		select {
		case <-b.kick:
		case <-b.stop:
			return // Flush callers still waiting see stop closed
		}
		b.flushMu.Lock()
		r := b.next
		b.next = nil
		b.flushMu.Unlock()
		if r != nil {
			r.End(b.flushPublished())
		}
	}
}

// flushPublished is the flusher's round trip. One that a reconnection interrupted can be
// answered by the next server (nats.go queues its PING for it, and drops only the PINGs
// waiting when the connection broke), while what was published before it went to the lost
// server: that is a failure, so that the publisher publishes again (at least once).
func (b *Broker) flushPublished() error {
	n := b.nc.Stats().Reconnects // counted before the next server gets the PING
	err := b.flush(context.Background(), "nats flush")
	if err == nil && b.nc.Stats().Reconnects != n {
		return broker.Unavailable("nats flush", errors.New("the connection was replaced during the round trip"))
	}
	return err
}

// flush returns once the server has processed everything written before it: a round trip.
func (b *Broker) flush(ctx context.Context, what string) error {
	if !b.nc.IsConnected() {
		return broker.Unavailable(what, nil)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.Timeout)
		defer cancel()
	}
	t0 := time.Now()
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return broker.Unavailable(what, err)
	}
	if b.cfg.RoundTrip != nil {
		b.cfg.RoundTrip(time.Since(t0))
	}
	return nil
}

// sub holds a subscription for k (kept, and restored by nats.go, even when the flush that
// confirms it fails) and confirms it with a round trip.
func (b *Broker) sub(ctx context.Context, k broker.Key) error {
	if b.closed.Load() {
		return broker.Unavailable("nats subscribe", errors.New("broker closed"))
	}
	b.mu.Lock()
	if b.subs[k] == nil {
		q := b.in
		if k.App == "" {
			q = b.ctl
		}
		s, err := b.nc.ChanSubscribe(broker.Subject(b.cfg.Prefix, k.App, k.Channel), q)
		if err != nil {
			b.mu.Unlock()
			return broker.Unavailable("nats subscribe", err)
		}
		b.subs[k] = s
	}
	b.mu.Unlock()
	return b.flush(ctx, "nats subscribe")
}

func (b *Broker) unsub(ctx context.Context, k broker.Key) error {
	b.mu.Lock()
	s := b.subs[k]
	delete(b.subs, k)
	if s != nil {
		if n, err := s.Dropped(); err == nil {
			b.lostDropped += uint64(n)
			if n > b.seenDropped[k] {
				b.lost.Add(k)
			}
		}
		delete(b.seenDropped, k)
	}
	b.mu.Unlock()
	if s == nil {
		return nil
	}
	if err := s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return broker.Unavailable("nats unsubscribe", err)
	}
	return b.flush(ctx, "nats unsubscribe")
}

// Publish implements herald.Broker.
func (b *Broker) Publish(_ context.Context, msg herald.BusMessage) error {
	if b.closed.Load() || !b.nc.IsConnected() {
		b.count.PublishErrors.Add(1)
		return broker.Unavailable("nats publish", nil)
	}
	msg.Node = b.cfg.NodeID
	var buf *[]byte
	if b.auth != nil {
		buf = getBuf(broker.SealedSize(msg))
		*buf = b.auth.Seal((*buf)[:0], msg)
	} else {
		buf = getBuf(broker.EncodedSize(msg))
		*buf = broker.AppendMessage((*buf)[:0], msg)
	}
	err := b.publish(broker.Subject(b.cfg.Prefix, msg.App, msg.Channel), *buf)
	putBuf(buf)
	return err
}

// publish publishes one encoded message on subject (nats.go copies the bytes) and counts it.
func (b *Broker) publish(subject string, data []byte) error {
	err := b.nc.Publish(subject, data)
	n := len(data)
	if err != nil {
		b.count.PublishErrors.Add(1)
		if errors.Is(err, nats.ErrMaxPayload) {
			return fmt.Errorf("nats publish: %w: %w", herald.Errorf(herald.CodeTooLarge, "message too large for the cluster bus"), err)
		}
		return broker.Unavailable("nats publish", err)
	}
	b.count.CountSent(n)
	return nil
}

// Flush implements herald.Broker: it joins the next round trip of the flusher. Everything
// Publish accepted before is in the connection's writer, so the PING of that round trip
// follows it, and the server answers PONG after processing it.
func (b *Broker) Flush(ctx context.Context) error {
	if b.closed.Load() {
		return broker.Unavailable("nats flush", errors.New("broker closed"))
	}
	if !b.nc.IsConnected() {
		return broker.Unavailable("nats flush", nil)
	}
	b.flushMu.Lock()
	r := b.next
	if r == nil {
		r = broker.NewRound()
		b.next = r
	}
	b.flushMu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // the flusher has been told already
	}
	return r.Wait(ctx, b.stop, "nats flush")
}

// Subscribe implements herald.Broker.
func (b *Broker) Subscribe(ctx context.Context, app, channel string) error {
	return b.interests.Acquire(ctx, broker.Key{App: app, Channel: channel})
}

// Unsubscribe implements herald.Broker.
func (b *Broker) Unsubscribe(ctx context.Context, app, channel string) error {
	return b.interests.Release(ctx, broker.Key{App: app, Channel: channel})
}

// Connected implements herald.Broker.
func (b *Broker) Connected() bool { return !b.closed.Load() && b.nc.IsConnected() }

// Losses calls f with each (app, channel) whose received messages this node dropped since
// the last call (nats.go drops what arrives for a subscription while the handler's queue is
// full, and counts it per subscription); false (f not called) when too many did to remember.
func (b *Broker) Losses(f func(app, channel string)) bool {
	if time.Now().UnixMilli() > b.slowUntil.Load() {
		return b.lost.Take(f) // no slow consumer reported lately: no subscription to look at
	}
	b.mu.Lock()
	for k, s := range b.subs {
		if n, err := s.Dropped(); err == nil && n > b.seenDropped[k] {
			if b.seenDropped == nil {
				b.seenDropped = map[broker.Key]int{}
			}
			b.seenDropped[k] = n
			b.lost.Add(k)
		}
	}
	b.mu.Unlock()
	return b.lost.Take(f)
}

// Connection numbers the broker's connection to its server: it changes once a lost
// connection is replaced (ingest.Reconnector). What Flush answered for on the lost one had
// reached that server, but perhaps not the other servers of its cluster: a server killed
// right after answering may not have passed it on over its routes.
func (b *Broker) Connection() uint64 { return b.count.Reconnects.Load() }

// Server names the NATS server the broker is connected to ("" while it is not).
func (b *Broker) Server() string {
	if !b.Connected() {
		return ""
	}
	return b.nc.ConnectedServerName()
}

// Stats implements herald.Broker.
func (b *Broker) Stats() herald.BrokerStats {
	b.mu.Lock()
	dropped := b.lostDropped
	queued := 0
	for _, s := range b.subs {
		if n, err := s.Dropped(); err == nil {
			dropped += uint64(n)
		}
		if n, _, err := s.Pending(); err == nil {
			queued += n
		}
	}
	b.mu.Unlock()
	st := b.count.Stats()
	st.Queued, st.QueueCap = queued, b.cfg.QueueSize
	st.Connected, st.Interests = b.Connected(), b.interests.Len()
	st.Dropped += dropped // nats.go drops what arrives while the handler's queue is full
	return st
}

// Close implements herald.Broker.
func (b *Broker) Close(ctx context.Context) error {
	b.closing.Do(func() {
		b.closed.Store(true)
		close(b.stop)
		b.nc.Close()
	})
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("nats broker: close: %w", ctx.Err())
	}
}
