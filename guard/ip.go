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

// IPRate limits how fast each client address may open connections. An IPv6 client is keyed
// by its network prefix (a /64 by default), not its whole address: one host or subscriber is
// usually given a whole /64 and can rotate through it at will.
type IPRate struct {
	rate   Rate
	v6Bits int // IPv6 prefix length an address is keyed by
	seed   maphash.Seed
	shards [ipShards]ipShard
}

type ipShard struct {
	mu        sync.Mutex
	m         map[netip.Addr]*Bucket
	lastSweep int64
}

// DefaultIPv6Prefix is the IPv6 prefix length IPRate keys clients by unless told otherwise:
// the /64 a host or a subscriber's network is usually given.
const DefaultIPv6Prefix = 64

// NewIPRate limits each IPv4 address, and each IPv6 network of ipv6Bits bits (0 means
// DefaultIPv6Prefix, 128 each address), to r; an unlimited r allows everything without
// bookkeeping.
func NewIPRate(r Rate, ipv6Bits int) *IPRate {
	if ipv6Bits <= 0 || ipv6Bits > 128 {
		ipv6Bits = DefaultIPv6Prefix
	}
	l := &IPRate{rate: r, v6Bits: ipv6Bits, seed: maphash.MakeSeed()}
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
	ok := false
	l.with(ip, now, func(b *Bucket) { ok, _ = b.Take(l.rate, now) })
	return ok
}

// Solvent reports whether ip's bucket has tokens left at now (Bucket.Solvent).
func (l *IPRate) Solvent(ip netip.Addr, now int64) bool {
	if l == nil || l.rate.Unlimited() {
		return true
	}
	ok := false
	l.with(ip, now, func(b *Bucket) { ok = b.Solvent(l.rate, now) })
	return ok
}

// Spend takes n tokens of ip's bucket at now, into debt if need be, unless it is in debt
// already (Bucket.Spend): for work measured in units, as replayed bytes.
func (l *IPRate) Spend(ip netip.Addr, n float64, now int64) bool {
	if l == nil || l.rate.Unlimited() {
		return true
	}
	ok := false
	l.with(ip, now, func(b *Bucket) { ok = b.Spend(l.rate, n, now) })
	return ok
}

// with calls f with ip's bucket, under its shard's lock, forgetting the shard's addresses
// whose bucket has refilled every sweepEvery.
func (l *IPRate) with(ip netip.Addr, now int64, f func(b *Bucket)) {
	ip = l.key(ip)
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
	f(b)
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

// key is what ip is counted under: an IPv4 address (an IPv4-mapped IPv6 one unmapped) as it
// is, an IPv6 address as its network of l.v6Bits bits (the zone dropped).
func (l *IPRate) key(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if !ip.Is6() {
		return ip
	}
	p, err := ip.WithZone("").Prefix(l.v6Bits)
	if err != nil {
		return ip
	}
	return p.Addr()
}
