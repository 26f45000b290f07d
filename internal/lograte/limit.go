package lograte

import "sync/atomic"

// Limit lets a repeated log line through at most once per interval. Its zero value lets
// the first line through at any clock of Unix milliseconds.
type Limit struct {
	last atomic.Int64 // clock of the last line let through
}

// Due reports whether a line may be logged at now, every or more after the last one, and
// claims it: of concurrent callers, one gets true. now and every are in the same unit
// (herald uses Unix milliseconds).
func (l *Limit) Due(now, every int64) bool {
	prev := l.last.Load()
	return now-prev >= every && l.last.CompareAndSwap(prev, now)
}
