package memory

import (
	"crypto/rand"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
)

// store is the channel histories of one Bus, shared by the Histories of every node attached
// to it: the in-process stand-in for a Redis server's keys. Channels are spread over shards by
// hash, each with its own lock. Nothing else holds memory for a channel: its entries are at
// most the last rule's Size, and a channel whose entries have all expired is dropped, by the
// next Publish or Read of it or by its shard's sweep (at most once a second per shard, run by
// a Publish or Read of any channel of the shard).
type store struct {
	seed   maphash.Seed
	base   string        // random, made with the store: the start of every epoch it gives
	runs   atomic.Uint64 // epochs given so far: the end of each
	shards [storeShards]shard
}

// storeShards spreads the channels, so that publishes to different channels rarely wait for
// one another.
const storeShards = 32

// sweepEvery is the least time between two sweeps of one shard.
const sweepEvery = time.Second

type shard struct {
	mu    sync.Mutex
	chans map[broker.Key]*channelLog
	keys  map[keyed]kept // idempotency keys of the shard's channels, until they expire
	swept time.Time
}

// keyed is an idempotency key of a channel.
type keyed struct {
	broker.Key
	key string
}

// kept is the position an idempotency key's event was given, until when it is remembered.
type kept struct {
	pos   herald.Position
	until time.Time
}

// channelLog is one channel's history in its epoch. Its entries are a ring, grown by doubling
// up to the rule's Size: a full channel keeps each new event in the slot of the oldest.
type channelLog struct {
	epoch string
	last  uint64        // the offset last given
	ttl   time.Duration // the TTL of the rule of its last publish, for the sweep
	ring  []herald.HistoryEntry
	head  int // the slot of the oldest entry
	n     int // entries retained: consecutive offsets up to last, oldest first from head
}

func newStore() *store {
	s := &store{seed: maphash.MakeSeed(), base: rand.Text()[:10]}
	for i := range s.shards {
		s.shards[i].chans = map[broker.Key]*channelLog{}
		s.shards[i].keys = map[keyed]kept{}
	}
	return s
}

func (s *store) shard(k broker.Key) *shard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.App)
	h.WriteByte(0)
	h.WriteString(k.Channel)
	return &s.shards[h.Sum64()%storeShards]
}

// newEpoch names a channel history that starts now: unique in the store, and (by the
// store's random base) among stores.
func (s *store) newEpoch() string {
	return s.base + "-" + strconv.FormatUint(s.runs.Add(1), 36)
}

// lose drops every channel's history.
func (s *store) lose() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		clear(sh.chans)
		clear(sh.keys)
		sh.mu.Unlock()
	}
}

// live returns k's history with its entries older than ttl dropped, or nil when it has none
// left (then k is dropped too). now is the time the caller works at. The caller holds sh.mu.
func (sh *shard) live(k broker.Key, now time.Time, ttl time.Duration) *channelLog {
	if now.Sub(sh.swept) >= sweepEvery {
		sh.sweep(now)
	}
	c := sh.chans[k]
	if c == nil || c.expire(now, ttl) {
		return nil
	}
	return c
}

// sweep drops the expired entries of every channel of the shard, and the channels left
// without any. The caller holds sh.mu.
func (sh *shard) sweep(now time.Time) {
	sh.swept = now
	for k, c := range sh.chans {
		if c.expire(now, c.ttl) {
			delete(sh.chans, k)
		}
	}
	for k, v := range sh.keys {
		if !now.Before(v.until) {
			delete(sh.keys, k)
		}
	}
}

// seen returns the position of k's event with key, when one was kept within its window. The
// caller holds sh.mu.
func (sh *shard) seen(k broker.Key, key string, now time.Time) (herald.Position, bool) {
	v, ok := sh.keys[keyed{k, key}]
	if !ok || !now.Before(v.until) {
		return herald.Position{}, false
	}
	return v.pos, true
}

// expire drops the entries kept ttl or longer before now, and reports whether none is left.
func (c *channelLog) expire(now time.Time, ttl time.Duration) bool {
	oldest := now.Add(-ttl).UnixMilli() // entries kept at or before it have expired
	for c.n > 0 && c.ring[c.head].At <= oldest {
		c.drop()
	}
	return c.n == 0
}

// drop forgets the oldest entry, and its frame.
func (c *channelLog) drop() {
	c.ring[c.head] = herald.HistoryEntry{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
}

// keep adds e and drops the oldest entries over size.
func (c *channelLog) keep(e herald.HistoryEntry, size int) {
	for c.n > 0 && c.n >= size {
		c.drop()
	}
	if c.n == len(c.ring) {
		grown := make([]herald.HistoryEntry, min(max(2*len(c.ring), 4), size))
		for i := range c.n {
			grown[i] = c.ring[(c.head+i)%len(c.ring)]
		}
		c.ring, c.head = grown, 0
	}
	c.ring[(c.head+c.n)%len(c.ring)] = e
	c.n++
}

// after returns up to limit entries with offsets after `after`, copied.
func (c *channelLog) after(after uint64, limit int) []herald.HistoryEntry {
	if limit <= 0 || c.n == 0 || after >= c.last {
		return nil
	}
	i := 0
	if first := c.last - uint64(c.n) + 1; after >= first {
		i = int(after - first + 1)
	}
	out := make([]herald.HistoryEntry, min(limit, c.n-i))
	for j := range out {
		out[j] = c.ring[(c.head+i+j)%len(c.ring)]
	}
	return out
}
