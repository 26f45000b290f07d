package httpapi

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/herald-rt/herald"
)

// DefaultReplayMaxPerApp bounds the signatures a node remembers for one app's replay
// protection: 1 Mi entries of 16-byte keys, about 70 MiB of resident memory (70 bytes each,
// measured: docs/benchmarks.md). An app that has more signed requests accepted within the
// entries' lifetime than its bound gets 503 for the excess (fail closed) until its oldest
// generation expires; the other apps are not affected. A shorter rest_timestamp_window lowers
// the need.
const DefaultReplayMaxPerApp = 1 << 20

// replayCaches is one replayCache per app, made on an app's first signed request: one app
// filling its own cannot refuse another's requests. Safe for concurrent use.
type replayCaches struct {
	window time.Duration
	limit  int
	apps   sync.Map // app id -> *replayCache
}

func newReplayCaches(window time.Duration, limit int) *replayCaches {
	if limit <= 0 {
		limit = DefaultReplayMaxPerApp
	}
	return &replayCaches{window: window, limit: limit}
}

// of returns the app's cache, making it on first use.
func (r *replayCaches) of(appID string) *replayCache {
	if c, ok := r.apps.Load(appID); ok {
		return c.(*replayCache)
	}
	c, _ := r.apps.LoadOrStore(appID, newReplayCache(r.window, r.limit))
	return c.(*replayCache)
}

// replayKey identifies one accepted request: a hash of its app and signature, truncated (a
// collision needs 2^64 requests inside one window).
type replayKey [16]byte

// replayCache remembers the signatures accepted within the timestamp window. A signature
// stays valid until its auth_timestamp plus the window, and the timestamp may be up to one
// window ahead of the server's clock, so an entry must live two windows after it was
// accepted. The cache keeps three generations, each spanning one window, and drops the
// oldest as a new one starts: an entry lives between two and three windows, and memory is
// bounded by what one node accepts in three windows, capped at limit. Rotation happens on
// use; no goroutine runs. It is safe for concurrent use; its mutex is held for a map lookup
// and insert.
type replayCache struct {
	window time.Duration
	limit  int

	mu    sync.Mutex
	start time.Time                 // when gens[0] began
	gens  [3]map[replayKey]struct{} // gens[0] is the newest
	size  int                       // entries in all generations
}

func newReplayCache(window time.Duration, limit int) *replayCache {
	if window <= 0 {
		window = 600 * time.Second
	}
	c := &replayCache{window: window, limit: limit}
	for i := range c.gens {
		c.gens[i] = map[replayKey]struct{}{}
	}
	return c
}

func keyOf(appID, signature string) replayKey {
	h := sha256.New()
	h.Write([]byte(appID))
	h.Write([]byte{0})
	h.Write([]byte(signature))
	var k replayKey
	copy(k[:], h.Sum(nil))
	return k
}

// check records a signature accepted at now, or refuses it when it was seen before (401) or
// when the cache is full (503).
func (c *replayCache) check(k replayKey, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rotate(now)
	for _, g := range c.gens {
		if _, seen := g[k]; seen {
			return herald.Errorf(herald.CodeUnauthorized, "replayed request: this signature was already used (rest_replay_protection is on; sign every request afresh)")
		}
	}
	if c.size >= c.limit {
		return herald.Errorf(herald.CodeBusy, "replay protection remembers %d signatures of this app, its limit on this node; retry later", c.limit)
	}
	c.gens[0][k] = struct{}{}
	c.size++
	return nil
}

// forget drops k again: the request it signed was refused after check (over the app's rate),
// so the client may send it again.
func (c *replayCache) forget(k replayKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.gens {
		if _, ok := g[k]; ok {
			delete(g, k)
			c.size--
			return
		}
	}
}

// rotate starts new generations as windows pass. c.mu must be held.
func (c *replayCache) rotate(now time.Time) {
	if c.start.IsZero() {
		c.start = now
		return
	}
	for i := 0; i < len(c.gens) && now.Sub(c.start) >= c.window; i++ {
		c.size -= len(c.gens[2])
		c.gens[2], c.gens[1], c.gens[0] = c.gens[1], c.gens[0], map[replayKey]struct{}{}
		c.start = c.start.Add(c.window)
	}
	if now.Sub(c.start) >= c.window { // idle for more than three windows: all expired
		c.start = now
	}
}
