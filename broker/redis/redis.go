package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/redis/rueidis"
)

var _ herald.Broker = (*Broker)(nil)

// Config configures a Redis broker. Zero values mean the defaults noted. Prefix starts
// every Redis channel name; Timeout also bounds each publish pipeline; an idle connection
// is PINGed every ProbeInterval.
type Config struct {
	// URL is redis://[user:password@]host:port[/db], or rediss:// for TLS (Common.TLS, when
	// set, is its configuration); required. The user and password are an ACL user's (Redis
	// 6 and later) or, with no user, the server's requirepass. Several such URLs,
	// comma-separated, are shards (place.go); redis+cluster://[user:password@]host:port,...
	// is a Redis Cluster and redis+sentinel://[user:password@]host:port,.../master[/db] a
	// primary found through Redis Sentinel (rediss+ for TLS): see ParseTopology.
	URL string
	broker.Common

	OutboundSize int // publishes queued for the writer; default 16384
	MaxBatch     int // PUBLISH commands in one pipeline; default 256
}

func (c Config) withDefaults() Config {
	c.Common = c.WithDefaults()
	if c.OutboundSize <= 0 {
		c.OutboundSize = 1 << 14
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	return c
}

// Broker is one node's connection to a Redis bus: one shard per standalone server, one per
// group of a Redis Cluster, or one for a sentinel set's primary. A channel's messages,
// interest and history go to the shard that holds it (shardOf).
type Broker struct {
	cfg     Config
	topo    Topology
	auth    *broker.Auth // nil: messages travel unsealed
	handler herald.BusHandler
	shards  []*shard
	seeds   []uint64 // the standalone shards' placement seeds (pick)
	in      chan []byte
	ctl     chan []byte // internal keys' messages (app id "")

	// shared is the one client of a Redis Cluster's groups, made by the first group to
	// connect (sharedClient) and closed by Close once the groups have stopped: rueidis
	// follows the cluster's topology and reconnects to its nodes by itself. Each group holds
	// its own dedicated subscriber connection from it.
	sharedMu sync.Mutex
	shared   rueidis.Client

	stop    chan struct{}
	wg      sync.WaitGroup
	closing sync.Once
	closed  atomic.Bool

	count broker.Counters
	lost  broker.Losses
}

// New returns a broker connected to Redis or, when a shard does not answer within Timeout,
// one whose shard reports not connected and keeps trying in the background.
func New(cfg Config, h herald.BusHandler) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check("redis", cfg.URL); err != nil {
		return nil, err
	}
	topo, err := ParseTopology(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis broker: url: %w", err)
	}
	if topo.Mode == Cluster && strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, fmt.Errorf("redis broker: prefix %q: a Redis Cluster's prefix may not hold { or } (they make hash tags)", cfg.Prefix)
	}
	auth, err := cfg.NewAuth("redis")
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, topo: topo, auth: auth, handler: h,
		in: make(chan []byte, cfg.QueueSize), ctl: make(chan []byte, cfg.QueueSize), stop: make(chan struct{})}
	var ids []string
	for _, spec := range topo.Shards {
		opt, err := b.option(spec.Option)
		if err != nil {
			return nil, err
		}
		if topo.Mode == Cluster {
			for g := range ClusterSlots {
				b.shards = append(b.shards, newShard(b, "cluster/"+strconv.Itoa(g), groupTag(cfg.Prefix, g), opt))
			}
			continue
		}
		ids = append(ids, spec.ID)
		b.shards = append(b.shards, newShard(b, spec.ID, "", opt))
	}
	b.seeds = seeds(ids)
	// One attempt per shard now, together, as nats.go does; the supervisors retry.
	var first sync.WaitGroup
	for _, s := range b.shards {
		b.wg.Add(2)
		first.Add(1)
		go func() {
			sess, err := s.connect()
			first.Done()
			s.supervise(sess, err)
		}()
		go s.write()
	}
	first.Wait()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		broker.Deliver(b.ctl, b.in, b.stop, func(data []byte) { b.count.Receive(data, b.auth, b.handler) },
			func() { broker.Drained(b.handler) })
	}()
	return b, nil
}

// option completes one shard's client option with the broker's configuration.
func (b *Broker) option(opt rueidis.ClientOption) (rueidis.ClientOption, error) {
	cfg := b.cfg
	if cfg.TLS != nil {
		if opt.TLSConfig == nil {
			return opt, errors.New("redis broker: a TLS configuration needs a rediss:// URL")
		}
		t := cfg.TLS.Clone()
		if t.ServerName == "" {
			t.ServerName = opt.TLSConfig.ServerName // the URL's host
		}
		opt.TLSConfig = t
		if opt.Sentinel.MasterSet != "" {
			opt.Sentinel.TLSConfig = t
		}
	}
	opt.DisableCache = true
	opt.ForceSingleClient = b.topo.Mode == Standalone
	opt.ClientName = "herald-" + clientName(cfg.NodeID)
	opt.ConnWriteTimeout = cfg.Timeout
	opt.Dialer.Timeout = cfg.Timeout
	if opt.Sentinel.MasterSet != "" {
		opt.Sentinel.Dialer.Timeout = cfg.Timeout
		opt.Sentinel.ClientName = opt.ClientName
	}
	return opt, nil
}

// sharedClient returns the Redis Cluster client the groups share, made on first use.
func (b *Broker) sharedClient(opt rueidis.ClientOption) (rueidis.Client, error) {
	b.sharedMu.Lock()
	defer b.sharedMu.Unlock()
	if b.shared != nil {
		return b.shared, nil
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	b.shared = c
	return c, nil
}

// shardOf returns the shard that holds (app, channel): by rendezvous hashing over the
// standalone shards, by group on a Redis Cluster (place.go).
func (b *Broker) shardOf(app, channel string) *shard {
	if b.topo.Mode == Cluster {
		return b.shards[ClusterGroup(app, channel)]
	}
	return b.shards[pick(b.seeds, app, channel)]
}

// internal is the shard of the internal keys (app id ""): the state stream's, which every
// node has interest in. The same hash places it, so every node finds it on the same shard.
func (b *Broker) internal() *shard { return b.shardOf("", "state") }

type doer interface {
	Do(context.Context, rueidis.Completed) rueidis.RedisResult
}

func (b *Broker) roundTrip(c doer, cmd rueidis.Completed) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	t0 := time.Now()
	err := c.Do(ctx, cmd).Error()
	if err == nil && b.cfg.RoundTrip != nil {
		b.cfg.RoundTrip(time.Since(t0))
	}
	return err
}

// onMessage runs on rueidis's reader goroutine: it queues the message for the delivery
// goroutine (an internal key's on a queue of its own), or drops it while the queue is full
// and records whose it was.
func (b *Broker) onMessage(m rueidis.PubSubMessage) {
	subject := m.Channel
	if strings.HasPrefix(subject, "{") { // a Redis Cluster group's hash tag first (groupTag)
		if i := strings.IndexByte(subject, '}'); i >= 0 {
			subject = subject[i+1:]
		}
	}
	q := b.in
	if broker.Internal(b.cfg.Prefix, subject) {
		q = b.ctl
	}
	select {
	case q <- []byte(m.Message):
	default:
		b.count.Dropped.Add(1)
		if k, ok := broker.ParseSubject(b.cfg.Prefix, subject); ok {
			b.lost.Add(k)
		}
	}
}

// Losses calls f with each (app, channel) whose received messages this node dropped since
// the last call, its queue full; false (f not called) when too many did to remember.
func (b *Broker) Losses(f func(app, channel string)) bool { return b.lost.Take(f) }

// Publish implements herald.Broker: it queues msg for the writer of its channel's shard.
func (b *Broker) Publish(ctx context.Context, msg herald.BusMessage) error {
	sh := b.shardOf(msg.App, msg.Channel)
	if b.closed.Load() || sh.sess.Load() == nil {
		b.count.PublishErrors.Add(1)
		return broker.Unavailable("redis publish", nil)
	}
	msg.Node = b.cfg.NodeID
	m := outMsg{channel: sh.subject(msg.App, msg.Channel)}
	if b.auth != nil {
		m.data = b.auth.Seal(make([]byte, 0, broker.SealedSize(msg)), msg)
	} else {
		m.data = broker.AppendMessage(make([]byte, 0, broker.EncodedSize(msg)), msg)
	}
	if err := sh.enqueue(ctx, m); err != nil {
		b.count.PublishErrors.Add(1)
		if ctx.Err() == nil {
			return broker.Unavailable("redis publish", err)
		}
		return fmt.Errorf("redis publish: %w", herald.Errorf(herald.CodeBusy, "cluster bus queue is full, retry later"))
	}
	sh.accepted.Add(1)
	b.count.CountSent(len(m.data))
	return nil
}

// Flush implements herald.Broker: on every shard with publishes pending (accepted and not
// yet sent, or lost in a failed pipeline that no successful one has followed), it queues a
// marker behind them and waits until the writer has ended the pipeline that carried the
// last of them (Redis routes a PUBLISH to the subscribers before it replies); the shards
// are flushed together. It fails when any of those shards is down or fails; shards with
// nothing pending are not waited for, down or not. With nothing pending it fails only when
// every shard is down.
func (b *Broker) Flush(ctx context.Context) error {
	if b.closed.Load() {
		return broker.Unavailable("redis flush", nil)
	}
	var pending []*shard
	anyUp := false
	for _, s := range b.shards {
		anyUp = anyUp || s.up.Load()
		if s.pending() {
			pending = append(pending, s)
		}
	}
	switch len(pending) {
	case 0:
		if !anyUp {
			return broker.Unavailable("redis flush", nil)
		}
		return nil
	case 1:
		return pending[0].flush(ctx)
	}
	errs := make([]error, len(pending))
	var wg sync.WaitGroup
	for i, s := range pending {
		wg.Go(func() { errs[i] = s.flush(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Subscribe implements herald.Broker, on the channel's shard.
func (b *Broker) Subscribe(ctx context.Context, app, channel string) error {
	return b.shardOf(app, channel).interests.Acquire(ctx, broker.Key{App: app, Channel: channel})
}

// Unsubscribe implements herald.Broker, on the channel's shard.
func (b *Broker) Unsubscribe(ctx context.Context, app, channel string) error {
	return b.shardOf(app, channel).interests.Release(ctx, broker.Key{App: app, Channel: channel})
}

// Connected implements herald.Broker: whether the shard of the internal keys (the state
// stream, which tells every node of every other) is connected. While another shard is down
// only its channels fail (their publishes and subscribes report CodeUnavailable): Shards
// says which.
func (b *Broker) Connected() bool { return !b.closed.Load() && b.internal().up.Load() }

// Shards reports each shard's state, in the order the broker holds them.
func (b *Broker) Shards() []ShardState {
	out := make([]ShardState, len(b.shards))
	for i, s := range b.shards {
		out[i] = s.state()
	}
	return out
}

// Mode is how the broker reaches Redis (from its URL's form).
func (b *Broker) Mode() Mode { return b.topo.Mode }

// Stats implements herald.Broker: the counters of every shard together.
func (b *Broker) Stats() herald.BrokerStats {
	st := b.count.Stats()
	st.Connected = b.Connected()
	st.Queued, st.QueueCap = len(b.in)+len(b.ctl), cap(b.in)+cap(b.ctl)
	for _, s := range b.shards {
		st.Interests += s.interests.Len()
	}
	return st
}

// Close implements herald.Broker.
func (b *Broker) Close(ctx context.Context) error {
	b.closing.Do(func() {
		b.closed.Store(true)
		close(b.stop)
	})
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		b.sharedMu.Lock()
		if b.shared != nil {
			b.shared.Close()
			b.shared = nil
		}
		b.sharedMu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("redis broker: close: %w", ctx.Err())
	}
}

// clientName keeps the characters of a node id that Redis allows in CLIENT SETNAME.
func clientName(id string) string {
	b := []byte(id)
	for i, c := range b {
		if c <= ' ' || c >= 0x7f {
			b[i] = '_'
		}
	}
	return string(b)
}
