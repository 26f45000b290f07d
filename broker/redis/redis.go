package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// 6 and later) or, with no user, the server's requirepass.
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

// session is one connected period: a client for PUBLISH and a dedicated subscriber
// connection.
type session struct {
	client rueidis.Client
	sub    rueidis.DedicatedClient
	cancel func()       // gives sub back; called once the session ends
	lost   <-chan error // receives when the subscriber connection is lost
}

func (s *session) close() {
	s.sub.Close()
	s.cancel()
	s.client.Close()
}

// outMsg is one entry of the writer's queue: a PUBLISH, or when flush is set a Flush
// waiting for the pipelines of the publishes queued before it.
type outMsg struct {
	channel string
	data    []byte
	flush   *broker.Round
	since   uint64 // for a Flush: pipelines ended when it was called
}

// Broker is one node's connection to a Redis bus.
type Broker struct {
	cfg       Config
	auth      *broker.Auth // nil: messages travel unsealed
	opt       rueidis.ClientOption
	handler   herald.BusHandler
	log       *slog.Logger
	interests *broker.Interests
	in        chan []byte
	ctl       chan []byte // internal keys' messages (app id "")
	out       chan outMsg
	pipelines atomic.Uint64 // pipelines the writer has ended, failed or not

	// sessMu is held for reading by each SUBSCRIBE/UNSUBSCRIBE for its round trip, and for
	// writing by the supervisor while it swaps sessions and subscribes every interest again.
	sessMu sync.RWMutex
	sess   atomic.Pointer[session]

	stop    chan struct{}
	wg      sync.WaitGroup
	closing sync.Once
	closed  atomic.Bool

	count broker.Counters
	lost  broker.Losses
}

// New returns a broker connected to Redis or, when Redis does not answer within Timeout,
// one that reports not connected and keeps trying in the background.
func New(cfg Config, h herald.BusHandler) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check("redis", cfg.URL); err != nil {
		return nil, err
	}
	auth, err := cfg.NewAuth("redis")
	if err != nil {
		return nil, err
	}
	opt, err := rueidis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis broker: url: %w", err)
	}
	if cfg.TLS != nil {
		if opt.TLSConfig == nil {
			return nil, errors.New("redis broker: a TLS configuration needs a rediss:// URL")
		}
		t := cfg.TLS.Clone()
		if t.ServerName == "" {
			t.ServerName = opt.TLSConfig.ServerName // the URL's host
		}
		opt.TLSConfig = t
	}
	opt.DisableCache = true
	opt.ForceSingleClient = true
	opt.ClientName = "herald-" + clientName(cfg.NodeID)
	opt.ConnWriteTimeout = cfg.Timeout
	opt.Dialer.Timeout = cfg.Timeout
	b := &Broker{cfg: cfg, auth: auth, opt: opt, handler: h, log: cfg.Logger.With("bus", "redis", "url", opt.InitAddress),
		in: make(chan []byte, cfg.QueueSize), ctl: make(chan []byte, cfg.QueueSize), out: make(chan outMsg, cfg.OutboundSize), stop: make(chan struct{})}
	b.interests = broker.NewInterests(b.sub, b.unsub)
	first, err := b.connect() // one attempt now, as nats.go does; the supervisor retries
	b.wg.Add(3)
	go b.supervise(first, err)
	go b.write()
	go func() {
		defer b.wg.Done()
		broker.Deliver(b.ctl, b.in, b.stop, func(data []byte) { b.count.Receive(data, b.auth, b.handler) },
			func() { broker.Drained(b.handler) })
	}()
	return b, nil
}

// supervise holds the session New made (or, when New's attempt failed with err, none),
// waits until its connection is lost, and connects again, forever.
func (b *Broker) supervise(s *session, err error) {
	defer b.wg.Done()
	wasUp, attempt := false, 0
	for {
		if s != nil {
			if wasUp {
				b.count.Reconnects.Add(1)
				b.log.Info("cluster bus reconnected", "interests", b.interests.Len())
			} else {
				b.log.Info("cluster bus connected")
			}
			wasUp, attempt = true, 0
			err = b.hold(s)
			b.sessMu.Lock()
			b.sess.Store(nil)
			b.sessMu.Unlock()
			b.interests.Unconfirm()
			s.close()
			if b.closed.Load() {
				return
			}
			b.log.Warn("cluster bus disconnected; reconnecting", "err", err)
		} else if attempt++; attempt == 1 {
			b.log.Warn("cluster bus unreachable; retrying", "err", err)
		}
		select {
		case <-b.stop:
			return
		case <-time.After(b.cfg.Reconnect(attempt)):
		}
		s, err = b.connect()
	}
}

// connect opens a session and SUBSCRIBEs every interest on it before publishing it.
func (b *Broker) connect() (*session, error) {
	if b.closed.Load() {
		return nil, errors.New("closed")
	}
	client, err := rueidis.NewClient(b.opt)
	if err != nil {
		return nil, err
	}
	sub, cancel := client.Dedicate()
	s := &session{client: client, sub: sub, cancel: cancel}
	s.lost = sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: b.onMessage})
	b.sessMu.Lock()
	defer b.sessMu.Unlock()
	keys := b.interests.Keys()
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		names := make([]string, n)
		for i, k := range keys[:n] {
			names[i] = broker.Subject(b.cfg.Prefix, k.App, k.Channel)
		}
		keys = keys[n:]
		if err := b.roundTrip(sub, sub.B().Subscribe().Channel(names...).Build()); err != nil {
			s.close()
			return nil, fmt.Errorf("subscribing again: %w", err)
		}
	}
	if err := b.roundTrip(sub, sub.B().Ping().Build()); err != nil { // the connection is up even with no interest
		s.close()
		return nil, err
	}
	b.sess.Store(s)
	return s, nil
}

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

// hold waits until the session's subscriber connection is lost or the broker closes,
// PINGing it while idle.
func (b *Broker) hold(s *session) error {
	t := time.NewTicker(b.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case err := <-s.lost:
			if err == nil {
				err = errors.New("subscriber connection closed")
			}
			return err
		case <-b.stop:
			return nil
		case <-t.C:
			if err := b.roundTrip(s.client, s.client.B().Ping().Build()); err != nil {
				return err
			}
		}
	}
}

// onMessage runs on rueidis's reader goroutine: it queues the message for the delivery
// goroutine (an internal key's on a queue of its own), or drops it while the queue is full
// and records whose it was.
func (b *Broker) onMessage(m rueidis.PubSubMessage) {
	q := b.in
	if broker.Internal(b.cfg.Prefix, m.Channel) {
		q = b.ctl
	}
	select {
	case q <- []byte(m.Message):
	default:
		b.count.Dropped.Add(1)
		if k, ok := broker.ParseSubject(b.cfg.Prefix, m.Channel); ok {
			b.lost.Add(k)
		}
	}
}

// Losses calls f with each (app, channel) whose received messages this node dropped since
// the last call, its queue full; false (f not called) when too many did to remember.
func (b *Broker) Losses(f func(app, channel string)) bool { return b.lost.Take(f) }

// write sends queued publishes, as many as have queued (up to MaxBatch), in one pipeline,
// then ends the Flush calls queued among them. Pipelines are numbered from 1 in the order
// they end. A Flush fails when any pipeline from the last one ended before its call to the
// one ended with it failed: every pipeline that can carry the caller's publish, unless the
// caller let a whole pipeline end between its Publish and its Flush.
func (b *Broker) write() {
	defer b.wg.Done()
	batch := make([]outMsg, 0, b.cfg.MaxBatch)
	var flushes []outMsg
	cmds := make(rueidis.Commands, 0, b.cfg.MaxBatch)
	var lastFailed uint64 // number of the last pipeline that failed; 0: none has
	var failure error     // its error
	take := func(m outMsg) {
		if m.flush != nil {
			flushes = append(flushes, m)
		} else {
			batch = append(batch, m)
		}
	}
	for {
		batch, flushes = batch[:0], flushes[:0]
		select {
		case m := <-b.out:
			take(m)
		case <-b.stop:
			return
		}
	fill:
		for len(batch) < b.cfg.MaxBatch {
			select {
			case m := <-b.out:
				take(m)
			default:
				break fill
			}
		}
		if len(batch) > 0 {
			n := b.pipelines.Load() + 1
			var err error
			if cmds, err = b.pipeline(batch, cmds); err != nil {
				lastFailed, failure = n, err
			}
			b.pipelines.Store(n)
		}
		for _, f := range flushes {
			if lastFailed != 0 && lastFailed >= f.since {
				f.flush.End(failure)
			} else {
				f.flush.End(nil)
			}
		}
	}
}

// pipeline sends batch as one pipeline of PUBLISH commands, built in cmds (returned for
// reuse), and returns the first error.
func (b *Broker) pipeline(batch []outMsg, cmds rueidis.Commands) (rueidis.Commands, error) {
	cmds = cmds[:0]
	s := b.sess.Load()
	if s == nil {
		b.count.PublishErrors.Add(uint64(len(batch)))
		return cmds, broker.Unavailable("redis publish", nil)
	}
	for _, m := range batch {
		cmds = append(cmds, s.client.B().Publish().Channel(m.channel).Message(rueidis.BinaryString(m.data)).Build())
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	t0 := time.Now()
	res := s.client.DoMulti(ctx, cmds...)
	cancel()
	var first error
	failed := 0
	for _, r := range res {
		if err := r.Error(); err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if failed > 0 {
		b.count.PublishErrors.Add(uint64(failed))
		return cmds, broker.Unavailable("redis publish", first)
	}
	if b.cfg.RoundTrip != nil {
		b.cfg.RoundTrip(time.Since(t0))
	}
	return cmds, nil
}

func (b *Broker) sub(ctx context.Context, k broker.Key) error {
	return b.subCmd(ctx, k, true)
}

func (b *Broker) unsub(ctx context.Context, k broker.Key) error {
	return b.subCmd(ctx, k, false)
}

// subCmd SUBSCRIBEs or UNSUBSCRIBEs k on the current session and waits for Redis's reply.
// With no session it fails at once (an unsubscribe then has nothing to undo: the next
// session subscribes only the keys with references).
func (b *Broker) subCmd(ctx context.Context, k broker.Key, on bool) error {
	what := "redis subscribe"
	if !on {
		what = "redis unsubscribe"
	}
	b.sessMu.RLock()
	defer b.sessMu.RUnlock()
	s := b.sess.Load()
	if s == nil || b.closed.Load() {
		if !on {
			return nil
		}
		return broker.Unavailable(what, nil)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.Timeout)
		defer cancel()
	}
	name := broker.Subject(b.cfg.Prefix, k.App, k.Channel)
	cmd := s.sub.B().Subscribe().Channel(name).Build()
	if !on {
		cmd = s.sub.B().Unsubscribe().Channel(name).Build()
	}
	t0 := time.Now()
	if err := s.sub.Do(ctx, cmd).Error(); err != nil {
		return broker.Unavailable(what, err)
	}
	if b.cfg.RoundTrip != nil {
		b.cfg.RoundTrip(time.Since(t0))
	}
	return nil
}

// Publish implements herald.Broker: it queues msg for the writer's next pipeline.
func (b *Broker) Publish(ctx context.Context, msg herald.BusMessage) error {
	if b.closed.Load() || b.sess.Load() == nil {
		b.count.PublishErrors.Add(1)
		return broker.Unavailable("redis publish", nil)
	}
	msg.Node = b.cfg.NodeID
	m := outMsg{channel: broker.Subject(b.cfg.Prefix, msg.App, msg.Channel)}
	if b.auth != nil {
		m.data = b.auth.Seal(make([]byte, 0, broker.SealedSize(msg)), msg)
	} else {
		m.data = broker.AppendMessage(make([]byte, 0, broker.EncodedSize(msg)), msg)
	}
	select {
	case b.out <- m:
	default:
		select {
		case b.out <- m:
		case <-ctx.Done():
			b.count.PublishErrors.Add(1)
			return fmt.Errorf("redis publish: %w", herald.Errorf(herald.CodeBusy, "cluster bus queue is full, retry later"))
		}
	}
	b.count.CountSent(len(m.data))
	return nil
}

// Flush implements herald.Broker: it queues a marker behind the publishes accepted so far
// and waits until the writer has ended the pipeline that carried the last of them (Redis
// routes a PUBLISH to the subscribers before it replies).
func (b *Broker) Flush(ctx context.Context) error {
	if b.closed.Load() || b.sess.Load() == nil {
		return broker.Unavailable("redis flush", nil)
	}
	m := outMsg{flush: broker.NewRound(), since: b.pipelines.Load()}
	select {
	case b.out <- m:
	default:
		select {
		case b.out <- m:
		case <-ctx.Done():
			return fmt.Errorf("redis flush: %w", ctx.Err())
		case <-b.stop:
			return broker.Unavailable("redis flush", errors.New("broker closed"))
		}
	}
	return m.flush.Wait(ctx, b.stop, "redis flush")
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
func (b *Broker) Connected() bool { return !b.closed.Load() && b.sess.Load() != nil }

// Stats implements herald.Broker.
func (b *Broker) Stats() herald.BrokerStats {
	st := b.count.Stats()
	st.Connected, st.Interests = b.Connected(), b.interests.Len()
	return st
}

// Close implements herald.Broker.
func (b *Broker) Close(ctx context.Context) error {
	b.closing.Do(func() {
		b.closed.Store(true)
		close(b.stop)
	})
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
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
