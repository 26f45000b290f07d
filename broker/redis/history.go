package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/redis/rueidis"
)

var _ herald.History = (*History)(nil)

// History is one node's herald.History on Redis, beside its Broker and on its connection
// (NewHistory). A channel's history is two keys, named with the broker's prefix and a hash
// tag so that a Redis Cluster keeps both in one slot:
//
//	<prefix>.history.{<app>.<channel>}.meta    a hash: e (the epoch), o (the last offset)
//	<prefix>.history.{<app>.<channel>}.stream  a stream of the entries, id <offset>-0,
//	                                           fields t (Unix ms) and f (the frame)
//
// (app and channel escaped as in broker.Subject), on the channel's shard; on a Redis Cluster
// both start with the channel's group tag instead ({<prefix>.<group>}<prefix>.history.<app>.<channel>.stream),
// the tag of its pub/sub channel, so the script touches one slot. Publish runs one script that atomically
// makes the meta hash when it is missing (a new random epoch, and the stream deleted), adds
// one to the offset, adds the entry to the stream capped at exactly the rule's Size, sets the
// stream to expire after the rule's TTL and the meta hash after MetaTTL or the TTL if longer,
// and PUBLISHes the encoded bus message with its position on the channel's pub/sub channel,
// the one the Broker subscribes to. So an offset is given once and none is skipped, an event
// is kept exactly when it is published, and every node receives one channel's events in
// offset order, whichever node published them (Redis does not undo a script that fails half
// way, which only a key of another type under these names could make it do). Times are
// Redis's clock (TIME), not the nodes'.
//
// With Sentinel or a Redis Cluster, where a replica promoted by a failover may lack the
// primary's last writes, the meta hash also holds r, the replication id (INFO's
// master_replid) of the primary that made it: a script that runs on a primary with another id
// treats the history as lost (Read: none; Publish: a new epoch at offset 1), so no offset is
// ever given twice to different events within one epoch.
//
// What is lost when: an entry past Size at once; entries older than TTL are not returned by
// Read (the stream itself expires TTL after the channel's last publish); when the meta hash
// is gone (MetaTTL after the last publish, FLUSHALL, eviction, a restart without
// persistence) the channel's next publish starts a new epoch at offset 1. Until then Read
// finds no history: the zero Latest (an empty Epoch means "no history yet"), and Read never
// creates one. A Redis that went back within an epoch (appendfsync everysec and a power cut)
// keeps the epoch with a lower offset; a cluster node that finds it out ends the epoch
// (Restart), and the channel's history starts again, empty, in a new one.
//
// A History is safe for concurrent use. Its calls wait for a round trip each (rueidis
// pipelines concurrent ones on the one connection).
type History struct {
	b *Broker

	chans broker.ChannelLocks[chanState] // with a cluster secret: what this node knows of each channel
}

// chanState is what a History with a cluster secret knows of one channel's history.
type chanState struct {
	known bool // pos is the channel's last position, as far as this node knows
	pos   herald.Position
}

// maxChanStates bounds the channels whose position a History remembers while no publish
// uses them; a channel forgotten costs its next publish one more round trip.
const maxChanStates = 10_000

// maxAttempts bounds the tries of one sealed publish that other nodes' publishes keep beating.
const maxAttempts = 64

// MetaTTL is how long a channel's epoch and last offset are kept after its last publish (or
// its rule's TTL, when longer). For that long a client that comes back after the events
// expired is told that they are gone (too_old) rather than that the history was lost
// (epoch_changed).
const MetaTTL = 24 * time.Hour

// NewHistory returns the History beside b, on b's Redis connection and prefix.
func NewHistory(b *Broker) *History {
	h := &History{b: b}
	h.chans.Max = maxChanStates
	return h
}

// keys returns the names of (app, channel)'s stream and meta hash on shard s. On a Redis
// Cluster they start with the group's hash tag instead, the one of the channel's pub/sub
// name, so that the script that keeps an event and publishes it touches one slot.
func (h *History) keys(s *shard, app, channel string) (stream, meta string) {
	base := h.b.cfg.Prefix + ".history.{" + broker.Token(app) + "." + broker.Token(channel) + "}"
	if s.sharded() {
		base = s.tag + h.b.cfg.Prefix + ".history." + broker.Token(app) + "." + broker.Token(channel)
	}
	return base + ".stream", base + ".meta"
}

// withKey returns the script keys of a publish: the channel's stream and meta keys, and the
// key that holds the position of the event of an idempotency key, when it has one (in the
// channel's hash slot).
func (h *History) withKey(stream, meta, key string) []string {
	if key == "" {
		return []string{stream, meta}
	}
	return []string{stream, meta, strings.TrimSuffix(meta, ".meta") + ".key:" + key}
}

// client returns the client of (app, channel)'s shard, or the error of an operation (what)
// while that shard is down.
func (h *History) client(what, app, channel string) (*shard, rueidis.Client, error) {
	sh := h.b.shardOf(app, channel)
	s := sh.sess.Load()
	if h.b.closed.Load() || s == nil {
		return nil, nil, broker.Unavailable(what, nil)
	}
	return sh, s.client, nil
}

// scriptArgs are the arguments every script takes last: the command that publishes
// (SPUBLISH on a Redis Cluster) and whether the history is bound to the primary's
// replication id (Sentinel, Cluster: a failover changes the epoch, see History).
func (h *History) scriptArgs(s *shard) (verb, check string) {
	verb, check = "PUBLISH", "0"
	if s.sharded() {
		verb = "SPUBLISH"
	}
	if h.b.topo.Mode != Standalone {
		check = "1"
	}
	return verb, check
}

// exec runs script with a deadline (the broker's Timeout when ctx has none) and observes its
// round trip.
func (h *History) exec(ctx context.Context, c rueidis.Client, script *rueidis.Lua, keys, args []string) ([]rueidis.RedisMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.b.cfg.Timeout)
		defer cancel()
	}
	t0 := time.Now()
	res, err := script.Exec(ctx, c, keys, args).ToArray()
	if err == nil && h.b.cfg.RoundTrip != nil {
		h.b.cfg.RoundTrip(time.Since(t0))
	}
	return res, err
}

// Publish implements herald.History. With the bus down it fails at once, having given no
// offset; when the script's round trip fails the offset may have been given, the entry kept
// and the message published, or not.
func (h *History) Publish(ctx context.Context, rule herald.HistoryRule, msg herald.BusMessage) (herald.Position, error) {
	const what = "redis history publish"
	if err := broker.CheckRule(rule); err != nil {
		return herald.Position{}, err
	}
	sh, c, err := h.client(what, msg.App, msg.Channel)
	if err != nil {
		h.b.count.PublishErrors.Add(1)
		return herald.Position{}, err
	}
	msg.Node = h.b.cfg.NodeID
	if h.b.auth != nil {
		return h.publishSealed(ctx, sh, c, rule, msg)
	}
	msg.Epoch, msg.Offset = "", 0
	payload := msg.Payload
	msg.Payload = nil
	head := broker.AppendPlain(make([]byte, 0, broker.EncodedSize(msg)), msg)
	stream, meta := h.keys(sh, msg.App, msg.Channel)
	verb, check := h.scriptArgs(sh)
	res, err := h.exec(ctx, c, publishScript, h.withKey(stream, meta, msg.Key), []string{
		strconv.Itoa(rule.Size), millis(rule.TTL), millis(max(rule.TTL, MetaTTL)), broker.NewEpoch(),
		sh.subject(msg.App, msg.Channel), rueidis.BinaryString(head), rueidis.BinaryString(payload), verb, check,
		millis(h.b.cfg.KeyWindow)})
	var p herald.Position
	if err == nil {
		p, err = position(res)
	}
	if err != nil {
		h.b.count.PublishErrors.Add(1)
		return herald.Position{}, broker.Unavailable(what, err)
	}
	h.b.count.CountSent(len(head) + len(payload) + 2 + len(p.Epoch) + 8)
	return p, nil
}

// publishSealed is Publish with a cluster secret. The message must be sealed with its
// position in it, so this node gives the position (the last one it knows of the channel plus
// one), and the script keeps and publishes it only if that is still the channel's next;
// otherwise the script answers the channel's position and the node tries again with the one
// after it. The publishes of one channel from this node so wait for one another (one round
// trip each), as on NATS; those of different channels do not. A node's first publish of a
// channel that has a history takes two round trips (it expects none).
func (h *History) publishSealed(ctx context.Context, sh *shard, c rueidis.Client, rule herald.HistoryRule, msg herald.BusMessage) (herald.Position, error) {
	const what = "redis history publish"
	k := broker.Key{App: msg.App, Channel: msg.Channel}
	cs, unlock := h.chans.Lock(k)
	defer unlock()
	stream, meta := h.keys(sh, msg.App, msg.Channel)
	channel := sh.subject(msg.App, msg.Channel)
	verb, check := h.scriptArgs(sh)
	size, ttl, metaTTL := strconv.Itoa(rule.Size), millis(rule.TTL), millis(max(rule.TTL, MetaTTL))
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		fresh := "0"
		if !cs.known || cs.pos.Epoch == "" {
			cs.pos, fresh = herald.Position{Epoch: broker.NewEpoch()}, "1"
		}
		msg.Epoch, msg.Offset = cs.pos.Epoch, cs.pos.Offset+1
		sealed := h.b.auth.Seal(make([]byte, 0, broker.SealedSize(msg)), msg)
		res, err := h.exec(ctx, c, publishSealedScript, h.withKey(stream, meta, msg.Key), []string{size, ttl, metaTTL,
			cs.pos.Epoch, strconv.FormatUint(cs.pos.Offset, 10), channel, rueidis.BinaryString(sealed), fresh, verb, check,
			millis(h.b.cfg.KeyWindow)})
		var n int64
		var at herald.Position
		if err == nil {
			n, at, err = sealedAnswer(res)
		}
		if err != nil {
			cs.known = false
			h.b.count.PublishErrors.Add(1)
			return herald.Position{}, broker.Unavailable(what, err)
		}
		if n == sealedRepeat {
			return at, nil // kept and published by the publish its key names
		}
		if n == sealedKept {
			cs.known, cs.pos = true, herald.Position{Epoch: msg.Epoch, Offset: msg.Offset}
			h.b.count.CountSent(len(sealed))
			return cs.pos, nil
		}
		cs.known, cs.pos = true, at // beaten by another node, or the history was lost: again
	}
	h.b.count.PublishErrors.Add(1)
	return herald.Position{}, herald.Errorf(herald.CodeBusy, "%s: channel %q: %d attempts in a row beaten by other nodes' publishes", what, msg.Channel, maxAttempts)
}

// Read implements herald.History: one script, so Latest and the entries are of one moment.
func (h *History) Read(ctx context.Context, rule herald.HistoryRule, app, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	const what = "redis history read"
	if err := broker.CheckRule(rule); err != nil {
		return herald.HistoryPage{}, err
	}
	sh, c, err := h.client(what, app, channel)
	if err != nil {
		return herald.HistoryPage{}, err
	}
	if after == ^uint64(0) {
		limit = 0 // nothing can come after it
	}
	stream, meta := h.keys(sh, app, channel)
	_, check := h.scriptArgs(sh)
	res, err := h.exec(ctx, c, readScript, []string{stream, meta},
		[]string{strconv.FormatUint(after+1, 10) + "-0", strconv.Itoa(max(limit, 0)), millis(rule.TTL), check})
	if err != nil {
		return herald.HistoryPage{}, broker.Unavailable(what, err)
	}
	page, err := readPage(res)
	if err != nil {
		return herald.HistoryPage{}, herald.Errorf(herald.CodeInternal, "%s: %s/%s: %v", what, app, channel, err)
	}
	if h.b.auth != nil {
		page.Entries = h.open(page, app, channel)
	}
	return page, nil
}

// open replaces each of page's sealed entries by its frame. An entry that is not a sealed
// event of the channel at its position is dropped and counted (Forged): the page ends before
// it or, when it is the first, starts after it (those events are gone).
func (h *History) open(page herald.HistoryPage, app, channel string) []herald.HistoryEntry {
	out := page.Entries[:0]
	for _, e := range page.Entries {
		f, err := h.b.auth.OpenEntry(e.Frame, app, channel, herald.Position{Epoch: page.Latest.Epoch, Offset: e.Offset})
		if err != nil {
			h.b.count.Forged.Add(1)
			if len(out) > 0 {
				break
			}
			continue
		}
		e.Frame = f
		out = append(out, e)
	}
	return out
}

func millis(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
