package redis

import (
	"context"
	"strconv"
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
// (app and channel escaped as in broker.Subject). Publish runs one script that atomically
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
// What is lost when: an entry past Size at once; entries older than TTL are not returned by
// Read (the stream itself expires TTL after the channel's last publish); when the meta hash
// is gone (MetaTTL after the last publish, FLUSHALL, eviction, a restart without
// persistence) the channel's next publish starts a new epoch at offset 1. Until then Read
// finds no history: the zero Latest (an empty Epoch means "no history yet"), and Read never
// creates one.
//
// A History is safe for concurrent use. Its calls wait for a round trip each (rueidis
// pipelines concurrent ones on the one connection).
type History struct {
	b *Broker
}

// MetaTTL is how long a channel's epoch and last offset are kept after its last publish (or
// its rule's TTL, when longer). For that long a client that comes back after the events
// expired is told that they are gone (too_old) rather than that the history was lost
// (epoch_changed).
const MetaTTL = 24 * time.Hour

// NewHistory returns the History beside b, on b's Redis connection and prefix.
func NewHistory(b *Broker) *History { return &History{b: b} }

// keys returns the names of (app, channel)'s stream and meta hash.
func (h *History) keys(app, channel string) (stream, meta string) {
	base := h.b.cfg.Prefix + ".history.{" + broker.Token(app) + "." + broker.Token(channel) + "}"
	return base + ".stream", base + ".meta"
}

// client returns the connection's client, or the error of an operation (what) while the bus
// is down.
func (h *History) client(what string) (rueidis.Client, error) {
	s := h.b.sess.Load()
	if h.b.closed.Load() || s == nil {
		return nil, broker.Unavailable(what, nil)
	}
	return s.client, nil
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
	c, err := h.client(what)
	if err != nil {
		h.b.count.PublishErrors.Add(1)
		return herald.Position{}, err
	}
	msg.Node = h.b.cfg.NodeID
	msg.Epoch, msg.Offset = "", 0
	payload := msg.Payload
	msg.Payload = nil
	head := broker.AppendPlain(make([]byte, 0, broker.EncodedSize(msg)), msg)
	stream, meta := h.keys(msg.App, msg.Channel)
	res, err := h.exec(ctx, c, publishScript, []string{stream, meta}, []string{
		strconv.Itoa(rule.Size), millis(rule.TTL), millis(max(rule.TTL, MetaTTL)), broker.NewEpoch(),
		broker.Subject(h.b.cfg.Prefix, msg.App, msg.Channel), rueidis.BinaryString(head), rueidis.BinaryString(payload)})
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

// Read implements herald.History: one script, so Latest and the entries are of one moment.
func (h *History) Read(ctx context.Context, rule herald.HistoryRule, app, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	const what = "redis history read"
	if err := broker.CheckRule(rule); err != nil {
		return herald.HistoryPage{}, err
	}
	c, err := h.client(what)
	if err != nil {
		return herald.HistoryPage{}, err
	}
	if after == ^uint64(0) {
		limit = 0 // nothing can come after it
	}
	stream, meta := h.keys(app, channel)
	res, err := h.exec(ctx, c, readScript, []string{stream, meta},
		[]string{strconv.FormatUint(after+1, 10) + "-0", strconv.Itoa(max(limit, 0)), millis(rule.TTL)})
	if err != nil {
		return herald.HistoryPage{}, broker.Unavailable(what, err)
	}
	page, err := readPage(res)
	if err != nil {
		return herald.HistoryPage{}, herald.Errorf(herald.CodeInternal, "%s: %s/%s: %v", what, app, channel, err)
	}
	return page, nil
}

func millis(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
