package guard

import (
	"sync"
	"time"
)

// Rate is a token-bucket rate: PerSecond tokens are added each second, up to Burst. A zero
// PerSecond means unlimited.
type Rate struct {
	PerSecond float64
	Burst     float64
}

// Unlimited reports whether r lets everything through.
func (r Rate) Unlimited() bool { return r.PerSecond <= 0 }

// Bucket is the state of one token bucket; its rate is passed to Take, so a bucket costs 16
// bytes and many buckets can share one Rate. The zero value is a full bucket. A Bucket is not
// safe for concurrent use: its owner serialises calls.
type Bucket struct {
	used float64 // tokens taken and not yet refilled
	last int64   // unix nanoseconds of the last Take
}

// Take takes one token at now (unix nanoseconds). When the bucket is empty it returns false
// and how long until a token is available.
func (b *Bucket) Take(r Rate, now int64) (ok bool, wait time.Duration) {
	if r.Unlimited() {
		return true, 0
	}
	burst := max(r.Burst, 1)
	if b.last != 0 && now > b.last {
		b.used = max(b.used-float64(now-b.last)*r.PerSecond/1e9, 0)
	}
	b.last = now
	if b.used+1 <= burst {
		b.used++
		return true, 0
	}
	need := b.used + 1 - burst
	return false, time.Duration(need / r.PerSecond * 1e9)
}

// idle reports whether the bucket has refilled completely by now: forgetting it changes
// nothing.
func (b *Bucket) idle(r Rate, now int64) bool {
	return float64(now-b.last)*r.PerSecond/1e9 >= b.used
}

// Spend takes n tokens at now (unix nanoseconds) if the bucket is not in debt, even when
// fewer than n are left: the bucket may go into debt, which the rate repays before the next
// Spend succeeds. So one large piece of work (a replay of many bytes) is let through whole
// when the bucket has anything left, and the next waits until it is paid for. It reports
// false, taking nothing, while the bucket is in debt (or empty).
func (b *Bucket) Spend(r Rate, n float64, now int64) bool {
	if r.Unlimited() {
		return true
	}
	if !b.Solvent(r, now) {
		return false
	}
	b.used += n
	return true
}

// Solvent reports whether the bucket has tokens left at now: Spend would succeed.
func (b *Bucket) Solvent(r Rate, now int64) bool {
	if r.Unlimited() {
		return true
	}
	if b.last != 0 && now > b.last {
		b.used = max(b.used-float64(now-b.last)*r.PerSecond/1e9, 0)
	}
	b.last = max(b.last, now)
	return b.used < max(r.Burst, 1)
}

// Shared is a bucket with its rate that several goroutines spend from: an app's or a node's.
type Shared struct {
	mu sync.Mutex
	b  Bucket
	r  Rate
}

// NewShared returns a full bucket of rate r.
func NewShared(r Rate) *Shared { return &Shared{r: r} }

// Solvent is Bucket.Solvent; a nil Shared always is.
func (s *Shared) Solvent(now int64) bool {
	if s == nil || s.r.Unlimited() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Solvent(s.r, now)
}

// Spend is Bucket.Spend; a nil Shared lets everything through.
func (s *Shared) Spend(n float64, now int64) bool {
	if s == nil || s.r.Unlimited() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Spend(s.r, n, now)
}
