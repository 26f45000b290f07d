package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/nats-io/nats.go"
)

var _ herald.Broker = (*Broker)(nil)

// Config configures a NATS broker. Zero values mean the defaults noted.
type Config struct {
	URL    string // nats://host:port (comma-separated for several servers); required
	NodeID string // this node's id, unique in the cluster; required
	Prefix string // first subject token(s), namespacing clusters on one server; default "herald"

	QueueSize int           // received messages queued for the handler; default 65536
	Timeout   time.Duration // bounds a subscription's confirmation when ctx has none; default 5s
	// ReconnectWait is the first pause between reconnection attempts; it doubles up to
	// ReconnectMaxWait (defaults 100ms and 1s), with 20% jitter. Attempts never stop.
	ReconnectWait, ReconnectMaxWait time.Duration
	// ProbeInterval is how often the round trip is measured for RoundTrip; default 5s.
	ProbeInterval time.Duration
	RoundTrip     herald.BusObserver // nil: no probes
	Logger        *slog.Logger       // state changes only, never per message; nil: discard
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = "herald"
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 1 << 16
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Timeout, 5*time.Second)
	def(&c.ReconnectWait, 100*time.Millisecond)
	def(&c.ReconnectMaxWait, time.Second)
	def(&c.ProbeInterval, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Broker is one node's connection to a NATS bus.
type Broker struct {
	cfg       Config
	handler   herald.BusHandler
	nc        *nats.Conn
	in        chan *nats.Msg
	interests *broker.Interests

	mu          sync.Mutex
	subs        map[broker.Key]*nats.Subscription
	lostDropped uint64 // drops counted by subscriptions since removed

	flushMu sync.Mutex    // a leaf, held only to read or swap next
	next    *broker.Round // the round trip that Flush calls arriving now wait for; nil: none yet
	kick    chan struct{} // tells the flusher that next is waiting (capacity 1)

	stop    chan struct{}
	wg      sync.WaitGroup
	closing sync.Once
	closed  atomic.Bool

	sent, sentBytes, recv, recvBytes, pubErrs, dropped, reconnects atomic.Uint64
}

// New connects to the NATS bus. It returns at once even when the server is unreachable:
// the broker then reports not connected and keeps trying.
func New(cfg Config, h herald.BusHandler) (*Broker, error) {
	cfg = cfg.withDefaults()
	if cfg.URL == "" || cfg.NodeID == "" {
		return nil, errors.New("nats broker: URL and NodeID are required")
	}
	if !broker.ValidPrefix(cfg.Prefix) {
		return nil, fmt.Errorf("nats broker: prefix %q is not a valid subject", cfg.Prefix)
	}
	b := &Broker{cfg: cfg, handler: h, in: make(chan *nats.Msg, cfg.QueueSize),
		subs: map[broker.Key]*nats.Subscription{}, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	b.interests = broker.NewInterests(b.sub, b.unsub)
	log := cfg.Logger.With("bus", "nats", "url", broker.RedactURL(cfg.URL))
	nc, err := nats.Connect(cfg.URL,
		nats.Name("herald "+cfg.NodeID),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(n int) time.Duration { return broker.Backoff(cfg.ReconnectWait, cfg.ReconnectMaxWait, n) }),
		nats.Timeout(cfg.Timeout),
		nats.PingInterval(5*time.Second),
		nats.MaxPingsOutstanding(3),
		nats.ConnectHandler(func(*nats.Conn) { log.Info("cluster bus connected") }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			b.interests.Unconfirm()
			if !b.closed.Load() {
				log.Warn("cluster bus disconnected; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			b.reconnects.Add(1)
			log.Info("cluster bus reconnected", "interests", b.interests.Len())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				log.Warn("cluster bus: handler queue full, dropping messages", "queue", cfg.QueueSize)
				return
			}
			log.Warn("cluster bus error", "err", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("nats broker: connect: %w", err)
	}
	b.nc = nc
	b.wg.Add(2)
	go b.deliver()
	go b.flusher()
	if cfg.RoundTrip != nil {
		b.wg.Add(1)
		go b.probe()
	}
	return b, nil
}

// deliver hands received messages to the handler, in arrival order.
func (b *Broker) deliver() {
	defer b.wg.Done()
	for {
		select {
		case m := <-b.in:
			msg, err := broker.DecodeMessage(m.Data)
			if err != nil {
				b.dropped.Add(1)
				continue
			}
			b.recv.Add(1)
			b.recvBytes.Add(uint64(len(m.Data)))
			b.handler(msg)
		case <-b.stop:
			return
		}
	}
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
			r.End(b.flush(context.Background(), "nats flush"))
		}
	}
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
		s, err := b.nc.ChanSubscribe(broker.Subject(b.cfg.Prefix, k.App, k.Channel), b.in)
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
		}
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
		b.pubErrs.Add(1)
		return broker.Unavailable("nats publish", nil)
	}
	msg.Node = b.cfg.NodeID
	buf := getBuf(broker.EncodedSize(msg))
	*buf = broker.AppendMessage((*buf)[:0], msg)
	err := b.nc.Publish(broker.Subject(b.cfg.Prefix, msg.App, msg.Channel), *buf) // copies the bytes
	n := len(*buf)
	putBuf(buf)
	if err != nil {
		b.pubErrs.Add(1)
		if errors.Is(err, nats.ErrMaxPayload) {
			return fmt.Errorf("nats publish: %w: %w", herald.Errorf(herald.CodeTooLarge, "message too large for the cluster bus"), err)
		}
		return broker.Unavailable("nats publish", err)
	}
	b.sent.Add(1)
	b.sentBytes.Add(uint64(n))
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

// Stats implements herald.Broker.
func (b *Broker) Stats() herald.BrokerStats {
	b.mu.Lock()
	dropped := b.lostDropped
	for _, s := range b.subs {
		if n, err := s.Dropped(); err == nil {
			dropped += uint64(n)
		}
	}
	b.mu.Unlock()
	return herald.BrokerStats{Connected: b.Connected(), MessagesSent: b.sent.Load(), BytesSent: b.sentBytes.Load(),
		MessagesReceived: b.recv.Load(), BytesReceived: b.recvBytes.Load(), PublishErrors: b.pubErrs.Load(),
		Dropped: b.dropped.Load() + dropped, Reconnects: b.reconnects.Load(), Interests: b.interests.Len()}
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
