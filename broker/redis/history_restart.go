package redis

import (
	"context"
	"fmt"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/redis/rueidis"
)

// Restart ends (app, channel)'s epoch when it is still epoch: a cluster node asks for it when
// it finds that Redis went back within the epoch (it lost writes it had acknowledged: a power
// cut with appendfsync everysec), whose next publishes would be given offsets already given
// to the lost events. One script, a compare-and-set on the epoch: the stream is deleted and
// the meta hash gets a new epoch at offset 0, so that the next publish is offset 1 of the new
// epoch; when the epoch is another already (another node ended it first, or the history was
// lost), nothing changes. So nodes that find it out at once agree on one new epoch. It returns
// the channel's position then (the zero Position without a history).
func (h *History) Restart(ctx context.Context, rule herald.HistoryRule, app, channel, epoch string) (herald.Position, error) {
	const what = "redis history restart"
	if err := broker.CheckRule(rule); err != nil {
		return herald.Position{}, err
	}
	if epoch == "" {
		return herald.Position{}, herald.Errorf(herald.CodeInvalid, "%s: no epoch to end", what)
	}
	sh, c, err := h.client(what, app, channel)
	if err != nil {
		return herald.Position{}, err
	}
	stream, meta := h.keys(sh, app, channel)
	_, check := h.scriptArgs(sh)
	res, err := h.exec(ctx, c, restartScript, []string{stream, meta},
		[]string{epoch, broker.NewEpoch(), millis(max(rule.TTL, MetaTTL)), check})
	if err != nil {
		return herald.Position{}, broker.Unavailable(what, err)
	}
	p, err := epochOffset(res) // the epoch now, and its last offset
	if err != nil {
		return herald.Position{}, herald.Errorf(herald.CodeInternal, "%s: %s/%s: %v", what, app, channel, err)
	}
	return p, nil // a sealed publish expecting the old epoch is answered the new one
}

// restartScript: KEYS stream, meta; ARGV the epoch to end, the new epoch, the meta hash's ttl
// (ms), the replication id check (as publishScript's). It returns the channel's epoch (empty without
// a history) and last offset.
var restartScript = rueidis.NewLuaScript(`
local e = redis.call('HGET', KEYS[2], 'e')
` + fmt.Sprintf(replid, 4) + `
if not e then
  return {'', '0'}
end
if e ~= ARGV[1] then
  return {e, redis.call('HGET', KEYS[2], 'o') or '0'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'e', ARGV[2], 'o', 0)
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[2], 'r', r)
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {ARGV[2], '0'}
`)
