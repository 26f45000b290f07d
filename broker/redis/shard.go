package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/broker"
	"github.com/redis/rueidis"
)

// shard is one connection of a Broker: to one standalone server, to a sentinel set's primary,
// or to the node of a Redis Cluster that holds one group's hash slot. It has its own
// supervisor, writer and interest table; received messages go to the Broker's queue.
type shard struct {
	b         *Broker
	id        string // the shard's id (ShardSpec.ID; on a cluster, "cluster/<group>")
	tag       string // on a cluster, the hash tag that starts every name of the group; else ""
	opt       rueidis.ClientOption
	log       *slog.Logger
	interests *broker.Interests
	out       chan outMsg
	pipelines atomic.Uint64 // pipelines the writer has ended, failed or not

	// accepted counts the publishes Publish queued here, written those the writer has sent
	// (or failed to), and failed says the last pipeline failed: Broker.Flush waits only for
	// the shards with publishes pending or a failure not yet followed by a success (pending).
	accepted, written atomic.Uint64
	failed            atomic.Bool
	up                atomic.Bool // a session is held (Connected)
	reconnects        atomic.Uint64

	// sessMu is held for reading by each SUBSCRIBE/UNSUBSCRIBE for its round trip, and for
	// writing by the supervisor while it swaps sessions and subscribes every interest again.
	sessMu sync.RWMutex
	sess   atomic.Pointer[session]
}

// session is one connected period: a client for PUBLISH and a dedicated subscriber
// connection.
type session struct {
	client rueidis.Client
	sub    rueidis.DedicatedClient
	shared bool         // client is the Broker's shared one (a Redis Cluster): not closed here
	cancel func()       // gives sub back; called once the session ends
	lost   <-chan error // receives when the subscriber connection is lost
	// moved receives when Redis Cluster unsubscribed the group's own channel: its slot moved
	// to another node (Redis then ends every subscription of the slot), so the session ends
	// and the next one subscribes on the slot's new owner.
	moved chan struct{}
}

func (s *session) close() {
	s.sub.Close()
	s.cancel()
	if !s.shared {
		s.client.Close()
	}
}

// outMsg is one entry of the writer's queue: a PUBLISH, or when flush is set a Flush
// waiting for the pipelines of the publishes queued before it.
type outMsg struct {
	channel string
	data    []byte
	flush   *broker.Round
	since   uint64 // for a Flush: pipelines ended when it was called
}

func newShard(b *Broker, id, tag string, opt rueidis.ClientOption) *shard {
	s := &shard{b: b, id: id, tag: tag, opt: opt, out: make(chan outMsg, b.cfg.OutboundSize),
		log: b.cfg.Logger.With("bus", "redis", "shard", id, "url", opt.InitAddress)}
	s.interests = broker.NewInterests(s.sub, s.unsub)
	return s
}

// subject is the pub/sub channel of (app, channel) on this shard.
func (s *shard) subject(app, channel string) string {
	return s.tag + broker.Subject(s.b.cfg.Prefix, app, channel)
}

// sharded reports whether this shard uses sharded pub/sub (a Redis Cluster).
func (s *shard) sharded() bool { return s.tag != "" }

// supervise holds the session start made (or, when its attempt failed with err, none),
// waits until its connection is lost, and connects again, forever.
func (s *shard) supervise(sess *session, err error) {
	b := s.b
	defer b.wg.Done()
	wasUp, attempt := false, 0
	for {
		if sess != nil {
			if wasUp {
				s.reconnects.Add(1)
				b.count.Reconnects.Add(1)
				s.log.Info("cluster bus reconnected", "interests", s.interests.Len())
			} else {
				s.log.Info("cluster bus connected")
			}
			wasUp, attempt = true, 0
			err = s.hold(sess)
			s.sessMu.Lock()
			s.sess.Store(nil)
			s.up.Store(false)
			s.sessMu.Unlock()
			s.interests.Unconfirm()
			sess.close()
			if b.closed.Load() {
				return
			}
			s.log.Warn("cluster bus disconnected; reconnecting", "err", err)
		} else if attempt++; attempt == 1 {
			s.log.Warn("cluster bus unreachable; retrying", "err", err)
		}
		select {
		case <-b.stop:
			return
		case <-time.After(b.cfg.Reconnect(attempt)):
		}
		sess, err = s.connect()
	}
}

// connect opens a session and SUBSCRIBEs every interest on it before publishing it.
func (s *shard) connect() (*session, error) {
	b := s.b
	if b.closed.Load() {
		return nil, errors.New("closed")
	}
	var client rueidis.Client
	var err error
	if s.sharded() {
		client, err = b.sharedClient(s.opt)
	} else {
		client, err = rueidis.NewClient(s.opt)
	}
	if err != nil {
		return nil, err
	}
	sub, cancel := client.Dedicate()
	sess := &session{client: client, shared: s.sharded(), sub: sub, cancel: cancel, moved: make(chan struct{}, 1)}
	hooks := rueidis.PubSubHooks{OnMessage: b.onMessage}
	if s.sharded() {
		anchor := s.tag + "group"
		hooks.OnSubscription = func(ps rueidis.PubSubSubscription) {
			if ps.Kind == "sunsubscribe" && ps.Channel == anchor {
				select {
				case sess.moved <- struct{}{}:
				default:
				}
			}
		}
	}
	sess.lost = sub.SetPubSubHooks(hooks)
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	// The subscriber connection is up even with no interest: on a cluster its first command
	// must name the group's slot, so it subscribes to the group's own channel.
	first := sub.B().Ping().Build()
	if s.sharded() {
		first = sub.B().Ssubscribe().Channel(s.tag + "group").Build() // the anchor (moved)
	}
	if err := b.roundTrip(sub, first); err != nil {
		sess.close()
		return nil, err
	}
	keys := s.interests.Keys()
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		names := make([]string, n)
		for i, k := range keys[:n] {
			names[i] = s.subject(k.App, k.Channel)
		}
		keys = keys[n:]
		cmd := sub.B().Subscribe().Channel(names...).Build()
		if s.sharded() {
			cmd = sub.B().Ssubscribe().Channel(names...).Build()
		}
		if err := b.roundTrip(sub, cmd); err != nil {
			sess.close()
			return nil, fmt.Errorf("subscribing again: %w", err)
		}
	}
	s.sess.Store(sess)
	s.up.Store(true)
	return sess, nil
}

// hold waits until the session's subscriber connection is lost or the broker closes,
// PINGing it while idle.
func (s *shard) hold(sess *session) error {
	b := s.b
	t := time.NewTicker(b.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case err := <-sess.lost:
			if err == nil {
				err = errors.New("subscriber connection closed")
			}
			return err
		case <-sess.moved:
			return errors.New("the group's hash slot moved to another node")
		case <-b.stop:
			return nil
		case <-t.C:
			probe := sess.client.B().Ping().Build()
			if s.sharded() { // the group's node, not any
				probe = sess.client.B().Spublish().Channel(s.tag + "probe").Message("").Build()
			}
			if err := b.roundTrip(sess.client, probe); err != nil {
				return err
			}
		}
	}
}

// write sends queued publishes, as many as have queued (up to MaxBatch), in one pipeline,
// then ends the Flush calls queued among them. Pipelines are numbered from 1 in the order
// they end. A Flush fails when any pipeline from the last one ended before its call to the
// one ended with it failed: every pipeline that can carry the caller's publish, unless the
// caller let a whole pipeline end between its Publish and its Flush.
func (s *shard) write() {
	b := s.b
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
		case m := <-s.out:
			take(m)
		case <-b.stop:
			return
		}
	fill:
		for len(batch) < b.cfg.MaxBatch {
			select {
			case m := <-s.out:
				take(m)
			default:
				break fill
			}
		}
		if len(batch) > 0 {
			n := s.pipelines.Load() + 1
			var err error
			if cmds, err = s.pipeline(batch, cmds); err != nil {
				lastFailed, failure = n, err
			}
			s.failed.Store(err != nil)
			s.written.Add(uint64(len(batch)))
			s.pipelines.Store(n)
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

// pipeline sends batch as one pipeline of PUBLISH (on a cluster, SPUBLISH) commands, built
// in cmds (returned for reuse), and returns the first error.
func (s *shard) pipeline(batch []outMsg, cmds rueidis.Commands) (rueidis.Commands, error) {
	b := s.b
	cmds = cmds[:0]
	sess := s.sess.Load()
	if sess == nil {
		b.count.PublishErrors.Add(uint64(len(batch)))
		return cmds, broker.Unavailable("redis publish", nil)
	}
	for _, m := range batch {
		if s.sharded() {
			cmds = append(cmds, sess.client.B().Spublish().Channel(m.channel).Message(rueidis.BinaryString(m.data)).Build())
		} else {
			cmds = append(cmds, sess.client.B().Publish().Channel(m.channel).Message(rueidis.BinaryString(m.data)).Build())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	t0 := time.Now()
	res := sess.client.DoMulti(ctx, cmds...)
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

func (s *shard) sub(ctx context.Context, k broker.Key) error {
	return s.subCmd(ctx, k, true)
}

func (s *shard) unsub(ctx context.Context, k broker.Key) error {
	return s.subCmd(ctx, k, false)
}

// subCmd SUBSCRIBEs or UNSUBSCRIBEs k on the current session and waits for Redis's reply.
// With no session it fails at once (an unsubscribe then has nothing to undo: the next
// session subscribes only the keys with references).
func (s *shard) subCmd(ctx context.Context, k broker.Key, on bool) error {
	b := s.b
	what := "redis subscribe"
	if !on {
		what = "redis unsubscribe"
	}
	s.sessMu.RLock()
	defer s.sessMu.RUnlock()
	sess := s.sess.Load()
	if sess == nil || b.closed.Load() {
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
	name := s.subject(k.App, k.Channel)
	var cmd rueidis.Completed
	switch {
	case s.sharded() && on:
		cmd = sess.sub.B().Ssubscribe().Channel(name).Build()
	case s.sharded():
		cmd = sess.sub.B().Sunsubscribe().Channel(name).Build()
	case on:
		cmd = sess.sub.B().Subscribe().Channel(name).Build()
	default:
		cmd = sess.sub.B().Unsubscribe().Channel(name).Build()
	}
	t0 := time.Now()
	if err := sess.sub.Do(ctx, cmd).Error(); err != nil {
		return broker.Unavailable(what, err)
	}
	if b.cfg.RoundTrip != nil {
		b.cfg.RoundTrip(time.Since(t0))
	}
	return nil
}

// enqueue hands m to the writer, waiting while its queue is full until ctx is done.
func (s *shard) enqueue(ctx context.Context, m outMsg) error {
	select {
	case s.out <- m:
		return nil
	default:
	}
	select {
	case s.out <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.b.stop:
		return errors.New("broker closed")
	}
}

// pending reports whether a Flush must wait for this shard: publishes accepted and not yet
// sent, or a failed pipeline that no successful one has followed.
func (s *shard) pending() bool { return s.accepted.Load() > s.written.Load() || s.failed.Load() }

// flush waits until the writer has ended the pipeline that carried the last publish queued
// before it. A failed pipeline with nothing queued after it is reported once, to this call.
func (s *shard) flush(ctx context.Context) error {
	b := s.b
	if s.accepted.Load() <= s.written.Load() && s.failed.Swap(false) {
		return broker.Unavailable("redis flush", errors.New("shard "+s.id+": a publish pipeline failed"))
	}
	if s.sess.Load() == nil {
		return broker.Unavailable("redis flush", errors.New("shard "+s.id+" is down"))
	}
	m := outMsg{flush: broker.NewRound(), since: s.pipelines.Load()}
	if err := s.enqueue(ctx, m); err != nil {
		if ctx.Err() != nil {
			return broker.TimedOut("redis flush", err)
		}
		return broker.Unavailable("redis flush", err)
	}
	return m.flush.Wait(ctx, b.stop, "redis flush")
}

// ShardState is one shard's part of a Broker's health.
type ShardState struct {
	ID         string `json:"id"`
	Connected  bool   `json:"connected"`
	Interests  int    `json:"interests"`
	Reconnects uint64 `json:"reconnects"`
}

func (s *shard) state() ShardState {
	return ShardState{ID: s.id, Connected: s.up.Load(), Interests: s.interests.Len(), Reconnects: s.reconnects.Load()}
}

// groupTag is the hash tag of group g of a Redis Cluster: every key and pub/sub channel of
// the group starts with it, so they share one hash slot.
func groupTag(prefix string, g int) string {
	return "{" + prefix + "." + strconv.Itoa(g) + "}"
}
