package hub

import (
	"hash/maphash"
	"sync"
	"time"
)

// cacheTTL is how long a cache channel keeps its last event (Pusher keeps it 30 minutes).
const cacheTTL = 30 * time.Minute

const cacheShards = 16

// cache holds the last event frame of each cache channel of one app, with or without
// subscribers. Publishing to a cache channel and subscribing to one both happen under the
// channel's shard lock, so a subscriber gets each event exactly once: from the cache or live.
type cache struct {
	seed   maphash.Seed
	shards [cacheShards]struct {
		mu sync.Mutex
		m  map[string]cached
	}
}

type cached struct {
	frame []byte
	at    int64 // hub clock, ms
}

func newCache() *cache {
	c := &cache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = map[string]cached{}
	}
	return c
}

// with runs f with the channel's shard locked and access to its entry.
func (c *cache) with(name string, now int64, f func(last []byte) (next []byte)) {
	s := &c.shards[maphash.String(c.seed, name)%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[name]
	var last []byte
	if ok && now-e.at < cacheTTL.Milliseconds() {
		last = e.frame
	}
	if next := f(last); next != nil {
		s.m[name] = cached{frame: next, at: now}
	}
}

// expire forgets entries older than the TTL.
func (c *cache) expire(now int64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for name, e := range s.m {
			if now-e.at >= cacheTTL.Milliseconds() {
				delete(s.m, name)
			}
		}
		s.mu.Unlock()
	}
}

// has reports whether the channel has a live cached event (for the REST channel info).
func (c *cache) has(name string, now int64) bool {
	found := false
	c.with(name, now, func(last []byte) []byte { found = last != nil; return nil })
	return found
}
