package redis

import (
	"context"
	"errors"
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
// (app and channel escaped as in broker.Subject). Publish runs one script that atomically
// makes the meta hash when it is missing (a new random epoch, and the stream deleted), adds
// one to the offset, adds the entry to the stream capped at exactly the rule's Size, sets the
// stream to expire after the rule's TTL and the meta hash after MetaTTL or the TTL if longer,
// and PUBLISHes the encoded bus message with its position on the channel's pub/sub channel,
// the one the Broker subscribes to. So an offset is never given twice nor skipped, an event is
// kept exactly when it is published, and every node receives one channel's events in offset
// order, whichever node published them. Times are Redis's clock (TIME), not the nodes'.
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

// MetaTTL is how long a channel's epoch and last offset outlive its last publish when its
// rule's TTL is shorter, so that a client back after the events expired is told its events
// are gone (too old) rather than that the history was lost, for a day.
const MetaTTL = 24 * time.Hour

// NewHistory returns the History beside b, on b's Redis connection and prefix.
func NewHistory(b *Broker) *History { return &History{b: b} }

// publishScript: KEYS stream, meta; ARGV size, ttl (ms), meta ttl (ms), the epoch of a new
// history, the pub/sub channel, the message's plain encoding without its payload, the
// payload. The message it publishes is broker.AppendMessage's version 3: 3, the epoch's
// length and bytes, the offset as 8 bytes big-endian, then the plain encoding.
var publishScript = rueidis.NewLuaScript(`
local e = redis.call('HGET', KEYS[2], 'e')
if not e then
  e = ARGV[4]
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], 'e', e)
end
local o = redis.call('HINCRBY', KEYS[2], 'o', 1)
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], string.format('%d-0', o), 't', string.format('%d', ms), 'f', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local b, n = {}, o
for i = 8, 1, -1 do
  b[i] = n % 256
  n = math.floor(n / 256)
end
redis.call('PUBLISH', ARGV[5], '\3' .. string.char(#e) .. e .. string.char(unpack(b)) .. ARGV[6] .. ARGV[7])
return {e, string.format('%d', o)}
`)

// readScript: KEYS stream, meta; ARGV the first stream id to return, limit, ttl (ms). It
// returns the epoch (” without a meta hash), the last offset, and the entries (id, time,
// frame) from that id on, at most limit, skipping those kept ttl or longer ago (a prefix of
// the stream, so those returned have consecutive offsets).
var readScript = rueidis.NewLuaScript(`
local e = redis.call('HGET', KEYS[2], 'e')
if not e then
  return {'', '0', {}}
end
local o = redis.call('HGET', KEYS[2], 'o') or '0'
local limit = tonumber(ARGV[2])
local out = {}
if limit > 0 then
  local t = redis.call('TIME')
  local oldest = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[3])
  local start = ARGV[1]
  while #out < limit do
    local want = limit - #out
    local rows = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', want)
    for _, r in ipairs(rows) do
      if #out > 0 or tonumber(r[2][2]) > oldest then
        out[#out + 1] = {r[1], r[2][2], r[2][4]}
      end
    end
    if #rows < want then
      break
    end
    start = string.match(rows[#rows][1], '^%d+') .. '-1'
  end
end
return {e, o, out}
`)

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

// position reads the publish script's answer.
func position(res []rueidis.RedisMessage) (herald.Position, error) {
	if len(res) != 2 {
		return herald.Position{}, errors.New("unexpected answer")
	}
	epoch, err := res[0].ToString()
	if err != nil {
		return herald.Position{}, err
	}
	s, err := res[1].ToString()
	if err != nil {
		return herald.Position{}, err
	}
	o, err := strconv.ParseUint(s, 10, 64)
	if err != nil || epoch == "" || o == 0 {
		return herald.Position{}, errors.New("unexpected answer")
	}
	return herald.Position{Epoch: epoch, Offset: o}, nil
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

// readPage reads the read script's answer.
func readPage(res []rueidis.RedisMessage) (herald.HistoryPage, error) {
	var page herald.HistoryPage
	if len(res) != 3 {
		return page, errors.New("unexpected answer")
	}
	epoch, err := res[0].ToString()
	if err != nil {
		return page, err
	}
	if epoch == "" {
		return page, nil
	}
	s, _ := res[1].ToString()
	if page.Latest.Offset, err = strconv.ParseUint(s, 10, 64); err != nil {
		return page, err
	}
	page.Latest.Epoch = epoch
	rows, err := res[2].ToArray()
	if err != nil {
		return page, err
	}
	page.Entries = make([]herald.HistoryEntry, 0, len(rows))
	for _, r := range rows {
		f, err := r.ToArray()
		if err != nil || len(f) != 3 {
			return page, errors.New("unexpected entry")
		}
		id, _ := f[0].ToString()
		at, _ := f[1].ToString()
		frame, _ := f[2].ToString()
		id, ok := strings.CutSuffix(id, "-0")
		e := herald.HistoryEntry{Frame: []byte(frame)}
		var err1, err2 error
		e.Offset, err1 = strconv.ParseUint(id, 10, 64)
		e.At, err2 = strconv.ParseInt(at, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return page, errors.New("unexpected entry")
		}
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}

func millis(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
