package guard

import "time"

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
