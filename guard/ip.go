package guard

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// ipShards spreads addresses over independently locked maps so that concurrent handshakes
// from different addresses rarely meet on one lock.
const ipShards = 64

// sweepEvery is how often a shard forgets addresses whose bucket has refilled.
const sweepEvery = 10 * time.Second

// IPRate limits how fast each client address may open connections.
type IPRate struct {
	rate   Rate
	seed   maphash.Seed
	shards [ipShards]ipShard
}

type ipShard struct {
	mu        sync.Mutex
	m         map[netip.Addr]*Bucket
	lastSweep int64
}

// NewIPRate limits each address to r; an unlimited r allows everything without bookkeeping.
func NewIPRate(r Rate) *IPRate {
	l := &IPRate{rate: r, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = map[netip.Addr]*Bucket{}
	}
	return l
}

// Allow takes one connection attempt of ip at now (unix nanoseconds).
func (l *IPRate) Allow(ip netip.Addr, now int64) bool {
	if l == nil || l.rate.Unlimited() {
		return true
	}
	ip = ip.Unmap()
	b16 := ip.As16()
	s := &l.shards[maphash.Bytes(l.seed, b16[:])%ipShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now-s.lastSweep >= int64(sweepEvery) {
		s.lastSweep = now
		for a, b := range s.m {
			if b.idle(l.rate, now) {
				delete(s.m, a)
			}
		}
	}
	b := s.m[ip]
	if b == nil {
		b = &Bucket{}
		s.m[ip] = b
	}
	ok, _ := b.Take(l.rate, now)
	return ok
}

// Tracked is how many addresses the limiter remembers (tests and metrics).
func (l *IPRate) Tracked() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
