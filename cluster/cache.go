package cluster

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

const cacheShards = 16

// entryOverhead is what a cached event costs besides its frame and its channel name: the
// entry itself, its map slot (key and pointer, at the load of a map that has just grown)
// and the rounding of the name's allocation. Counting it keeps the bound true for many small
// events too.
const entryOverhead = int64(unsafe.Sizeof(cacheEntry{})) + 64 + 16

// The two lists an entry is on, newest first.
const (
	byNode = iota // every app's entries on this node
	byApp         // one app's entries
)

// cacheEntry is the last event of one cache channel. name, frame, at, size and c never
// change once the entry is in its shard's map, so readers need only the shard lock.
type cacheEntry struct {
	name  string
	frame []byte
	at    int64  // engine clock, ms, of the write
	size  int64  // bytes counted against the bounds
	c     *cache // the app's cache that holds it
	// Guarded by cacheNode.mu.
	link   [2]struct{ prev, next *cacheEntry } // indexed by byNode, byApp
	linked bool
	victim *cacheEntry // the next entry of a chain taken off the lists (see cacheNode.drop)
}

// cacheNode bounds the memory of every app's cache on this node: it keeps every entry on
// two lists in write order, the node's and its app's, and evicts the least recently written
// when an app passes appMax or the node passes max. Its lock is a leaf held for a few
// pointer updates per write to a cache channel; nothing else takes it.
type cacheNode struct {
	max, appMax int64 // bytes
	ttl         int64 // ms

	mu    sync.Mutex
	all   cacheEntry // sentinel of the node's list
	bytes int64      // held by all apps

	cachesMu sync.Mutex // guards caches: AddApp may run while compact walks them
	caches   []*cache   // every app's, for the periodic compaction; set up by AddApp
}

func newCacheNode(cfg Config) *cacheNode {
	n := &cacheNode{max: int64(cfg.CacheMaxBytes), appMax: int64(cfg.CacheMaxBytesPerApp), ttl: cfg.CacheTTL.Milliseconds()}
	n.all.link[byNode].prev, n.all.link[byNode].next = &n.all, &n.all
	return n
}

// cache holds the last event frame of each cache channel of one app, with or without
// subscribers, within the node's bounds. Publishing to a cache channel and subscribing to
// one both happen under the channel's shard lock, so a subscriber gets each event exactly
// once: from the cache or live.
type cache struct {
	node   *cacheNode
	seed   maphash.Seed
	shards [cacheShards]cacheShard
	own    cacheEntry // sentinel of this app's list; guarded by node.mu

	// Written under node.mu, read by metrics without a lock.
	bytes, entries, evictions atomic.Int64
}

type cacheShard struct {
	mu   sync.Mutex
	m    map[string]*cacheEntry
	peak int // most entries m has held since it was made
}

func newCache(n *cacheNode) *cache {
	c := &cache{node: n, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = map[string]*cacheEntry{}
	}
	c.own.link[byApp].prev, c.own.link[byApp].next = &c.own, &c.own
	n.cachesMu.Lock()
	n.caches = append(n.caches, c)
	n.cachesMu.Unlock()
	return c
}

func (c *cache) shard(name string) *cacheShard {
	return &c.shards[maphash.String(c.seed, name)%cacheShards]
}

// with runs f with the channel's shard locked and its live cached frame (nil if none); a
// non-nil result becomes the channel's cached frame.
func (c *cache) with(name string, now int64, f func(last []byte) (next []byte)) {
	s := c.shard(name)
	s.mu.Lock()
	e := s.m[name]
	var last []byte
	if e != nil && now-e.at < c.node.ttl {
		last = e.frame
	}
	var victims *cacheEntry
	if next := f(last); next != nil {
		victims = c.store(s, name, e, next, now)
	}
	s.mu.Unlock()
	c.node.drop(victims)
}

// store makes frame the channel's cached event in place of old (nil if none) and returns
// the entries evicted to stay within the bounds, to delete once s is unlocked. s is locked.
func (c *cache) store(s *cacheShard, name string, old *cacheEntry, frame []byte, now int64) (victims *cacheEntry) {
	if old != nil {
		name = old.name
	} else {
		name = strings.Clone(name) // the map key must not keep a decoder's buffer alive
	}
	// The encoder's buffer has room for escapes (an eighth of the data) and is rounded up to
	// an allocation size class: held for 30 minutes, that was 12% more than the frame. A copy
	// holds the frame alone, and its capacity is what it really occupies.
	frame = append([]byte(nil), frame...)
	e := &cacheEntry{name: name, frame: frame, at: now, c: c, size: int64(cap(frame)+len(name)) + entryOverhead}
	n := c.node
	fits := e.size <= n.appMax && e.size <= n.max
	n.mu.Lock()
	if old != nil && old.linked {
		n.unlinkLocked(old)
	}
	if fits {
		n.pushLocked(e)
	} else {
		c.evictions.Add(1) // larger than a bound: dropped at once, like an evicted event
	}
	victims = n.trimLocked(c)
	n.mu.Unlock()
	if fits {
		s.m[name] = e
		s.peak = max(s.peak, len(s.m))
	} else if old != nil {
		delete(s.m, name) // a subscriber must not get the event this one replaced
	}
	return victims
}

// pushLocked puts e at the front of the node's and its app's lists and counts it.
func (n *cacheNode) pushLocked(e *cacheEntry) {
	for k, head := range [2]*cacheEntry{&n.all, &e.c.own} {
		first := head.link[k].next
		e.link[k].prev, e.link[k].next = head, first
		first.link[k].prev, head.link[k].next = e, e
	}
	e.linked = true
	n.bytes += e.size
	e.c.bytes.Add(e.size)
	e.c.entries.Add(1)
}

// unlinkLocked takes e off both lists and uncounts it.
func (n *cacheNode) unlinkLocked(e *cacheEntry) {
	for k := range e.link {
		l := &e.link[k]
		l.prev.link[k].next, l.next.link[k].prev = l.next, l.prev
		l.prev, l.next = nil, nil
	}
	e.linked = false
	n.bytes -= e.size
	e.c.bytes.Add(-e.size)
	e.c.entries.Add(-1)
}

// trimLocked evicts the least recently written entries while c is over the per-app bound
// or the node over its bound, and returns them chained through victim.
func (n *cacheNode) trimLocked(c *cache) (victims *cacheEntry) {
	for c.bytes.Load() > n.appMax {
		victims = n.evictLocked(c.own.link[byApp].prev, victims)
	}
	for n.bytes > n.max {
		victims = n.evictLocked(n.all.link[byNode].prev, victims)
	}
	return victims
}

func (n *cacheNode) evictLocked(v, chain *cacheEntry) *cacheEntry {
	n.unlinkLocked(v)
	v.c.evictions.Add(1)
	v.victim = chain
	return v
}

// drop deletes a chain of entries taken off the lists from their maps, unless a newer
// write replaced them there. No lock may be held: each takes its own shard's.
func (n *cacheNode) drop(v *cacheEntry) {
	for v != nil {
		s := v.c.shard(v.name)
		s.mu.Lock()
		if s.m[v.name] == v {
			delete(s.m, v.name)
		}
		s.mu.Unlock()
		next := v.victim
		v.victim = nil
		v = next
	}
}

// expire forgets entries older than the TTL: the oldest are at the back of the node's list,
// so it touches only those. It takes the lock in batches, leaving room for writers.
func (n *cacheNode) expire(now int64) {
	for more := true; more; {
		var victims *cacheEntry
		n.mu.Lock()
		for i := 0; ; i++ {
			t := n.all.link[byNode].prev
			if t == &n.all || now-t.at < n.ttl {
				more = false
				break
			}
			if i == 1024 {
				break
			}
			n.unlinkLocked(t)
			t.victim, victims = victims, t
		}
		n.mu.Unlock()
		n.drop(victims)
	}
}

// compact rebuilds the shard maps that hold far fewer entries than they once did: a Go map
// keeps the room of its largest size, which a burst of small events would otherwise leave
// held after eviction or expiry.
func (n *cacheNode) compact() {
	n.cachesMu.Lock()
	caches := n.caches
	n.cachesMu.Unlock()
	for _, c := range caches {
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			if s.peak > 2*len(s.m)+64 {
				m := make(map[string]*cacheEntry, len(s.m))
				for k, e := range s.m {
					m[k] = e
				}
				s.m, s.peak = m, len(m)
			}
			s.mu.Unlock()
		}
	}
}

// keep keeps frame as the channel's last event, written at the engine clock's at, unless the
// channel holds a live one (a node that starts learns the others' cache channels this way).
func (c *cache) keep(name string, frame []byte, at, now int64) {
	if now-at >= c.node.ttl {
		return
	}
	s := c.shard(name)
	s.mu.Lock()
	var victims *cacheEntry
	if e := s.m[name]; e == nil || now-e.at >= c.node.ttl {
		victims = c.store(s, name, e, frame, at)
	}
	s.mu.Unlock()
	c.node.drop(victims)
}

// each calls f for every live cached event, a shard at a time (frames never change).
func (c *cache) each(now int64, f func(name string, frame []byte, at int64)) {
	type entry struct {
		name  string
		frame []byte
		at    int64
	}
	var list []entry
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if now-e.at < c.node.ttl {
				list = append(list, entry{e.name, e.frame, e.at})
			}
		}
		s.mu.Unlock()
		for _, e := range list {
			f(e.name, e.frame, e.at)
		}
		list = list[:0]
	}
}

// has reports whether the channel has a live cached event (for the REST channel info).
func (c *cache) has(name string, now int64) bool {
	found := false
	c.with(name, now, func(last []byte) []byte { found = last != nil; return nil })
	return found
}
