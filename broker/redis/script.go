package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/redis/rueidis"
)

// replid is the Lua that sets r to the replication id of the primary running the script and,
// when the history is bound to it (ARGV[check] is '1') and the meta hash was made under
// another one (a failover promoted a replica, which may lack the last writes), sets e
// (the meta hash's epoch, as read) to false: the history is then treated as lost, and a new
// epoch begins.
const replid = `
local r = ''
if ARGV[%d] == '1' then
  r = string.match(redis.call('INFO', 'replication'), 'master_replid:(%%w+)') or ''
  if e and redis.call('HGET', KEYS[2], 'r') ~= r then
    e = false
  end
end
`

// publishScript: KEYS stream, meta; ARGV size, ttl (ms), meta ttl (ms), the epoch of a new
// history, the pub/sub channel, the message's plain encoding without its payload, the
// payload, the publish command (PUBLISH, or SPUBLISH on a Redis Cluster), and '1' when the
// history is bound to the primary's replication id (replid). The message it publishes is
// broker.AppendMessage's version 3: 3, the epoch's length and bytes, the offset as 8 bytes
// big-endian, then the plain encoding.
//
// With a third key, the event's idempotency key (ARGV[10] its window in ms): when that key
// holds a position, the script keeps and publishes nothing and returns it; otherwise the key
// is set to the position given, for the window.
var publishScript = rueidis.NewLuaScript(`
if KEYS[3] then
  local d = redis.call('GET', KEYS[3])
  if d then
    local de, dof = string.match(d, '^(%S+) (%d+)$')
    return {de, dof}
  end
end
local e = redis.call('HGET', KEYS[2], 'e')
` + fmt.Sprintf(replid, 9) + `
if not e then
  e = ARGV[4]
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[2], 'e', e)
  if ARGV[9] == '1' then
    redis.call('HSET', KEYS[2], 'r', r)
  end
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
redis.call(ARGV[8], ARGV[5], '\3' .. string.char(#e) .. e .. string.char(unpack(b)) .. ARGV[6] .. ARGV[7])
if KEYS[3] then
  redis.call('SET', KEYS[3], e .. ' ' .. string.format('%d', o), 'PX', ARGV[10])
end
return {e, string.format('%d', o)}
`)

// publishSealedScript is publishScript for a node with a cluster secret, whose message is
// sealed with its position in it (broker.Auth): the node gives the position, and the script
// keeps and publishes the message only if that position is the channel's next. KEYS stream,
// meta; ARGV size, ttl (ms), meta ttl (ms), the epoch, the last offset the node expects
// (the message's offset less one), the pub/sub channel, the sealed message, and '1' when the
// node expects no history (the epoch is then a new one, and the offset 0), the publish
// command, and the replication id check (as publishScript's). It returns {1}
// when it published, else {0, the channel's epoch (empty without a history), its last offset}.
// The entry's field f is the sealed message, as published. With a third key, the event's
// idempotency key (ARGV[11] its window in ms), as publishScript's: when it holds a position
// the script returns {2, its epoch, its offset} and keeps nothing.
var publishSealedScript = rueidis.NewLuaScript(`
if KEYS[3] then
  local d = redis.call('GET', KEYS[3])
  if d then
    local de, dof = string.match(d, '^(%S+) (%d+)$')
    return {2, de, dof}
  end
end
local e = redis.call('HGET', KEYS[2], 'e')
local o = tonumber(redis.call('HGET', KEYS[2], 'o') or '0')
` + fmt.Sprintf(replid, 10) + `
if not e then
  o = 0
end
if ARGV[8] == '1' then
  if e then
    return {0, e, string.format('%d', o)}
  end
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[2], 'e', ARGV[4], 'o', 0)
  if ARGV[10] == '1' then
    redis.call('HSET', KEYS[2], 'r', r)
  end
elseif e ~= ARGV[4] or o ~= tonumber(ARGV[5]) then
  return {0, e or '', string.format('%d', o)}
end
o = redis.call('HINCRBY', KEYS[2], 'o', 1)
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], string.format('%d-0', o), 't', string.format('%d', ms), 'f', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call(ARGV[9], ARGV[6], ARGV[7])
if KEYS[3] then
  redis.call('SET', KEYS[3], ARGV[4] .. ' ' .. string.format('%d', o), 'PX', ARGV[11])
end
return {1}
`)

// readScript: KEYS stream, meta; ARGV the first stream id to return, limit, ttl (ms), the
// replication id check (as publishScript's: a history made under another primary's is none). It
// returns the epoch (” without a meta hash), the last offset, and the entries (id, time,
// frame) from that id on, at most limit, skipping those kept ttl or longer ago (a prefix of
// the stream, so those returned have consecutive offsets).
var readScript = rueidis.NewLuaScript(`
local e = redis.call('HGET', KEYS[2], 'e')
` + fmt.Sprintf(replid, 4) + `
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

// position reads the publish script's answer: a position of an event, never empty.
func position(res []rueidis.RedisMessage) (herald.Position, error) {
	p, err := epochOffset(res)
	if err == nil && (p.Epoch == "" || p.Offset == 0) {
		return herald.Position{}, errors.New("unexpected answer")
	}
	return p, err
}

// epochOffset reads a script's answer of an epoch and an offset ({epoch, offset}).
func epochOffset(res []rueidis.RedisMessage) (herald.Position, error) {
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
	if err != nil {
		return herald.Position{}, errors.New("unexpected answer")
	}
	return herald.Position{Epoch: epoch, Offset: o}, nil
}

// The sealed publish script's answers (sealedAnswer).
const (
	sealedBeaten = 0 // not kept: p is the channel's position
	sealedKept   = 1 // kept at the position the node gave
	sealedRepeat = 2 // not kept: p is the position of the event its idempotency key names
)

// sealedAnswer reads the sealed publish script's answer: sealedKept, or sealedBeaten and the
// channel's position (the zero Position without a history), or sealedRepeat and the position
// kept for the key.
func sealedAnswer(res []rueidis.RedisMessage) (n int64, p herald.Position, err error) {
	if len(res) == 0 {
		return 0, p, errors.New("unexpected answer")
	}
	n, err = res[0].AsInt64()
	if err != nil || n == sealedKept && len(res) == 1 {
		return n, p, err
	}
	if len(res) != 3 || n != sealedBeaten && n != sealedRepeat {
		return 0, p, errors.New("unexpected answer")
	}
	if p.Epoch, err = res[1].ToString(); err != nil {
		return 0, p, err
	}
	s, err := res[2].ToString()
	if err != nil {
		return 0, p, err
	}
	if p.Offset, err = strconv.ParseUint(s, 10, 64); err != nil {
		return 0, p, err
	}
	return n, p, nil
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
