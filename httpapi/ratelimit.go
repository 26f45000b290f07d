package httpapi

import (
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
)

// rateLimiter is one app's REST request rate on this node. Its mutex is the app's alone.
type rateLimiter struct {
	rate guard.Rate
	mu   sync.Mutex
	b    guard.Bucket
}

// limiter returns app's rate limiter, creating it on first use.
func (s *Server) limiter(app *herald.App) *rateLimiter {
	if l, ok := s.limiters.Load(app.ID); ok {
		return l.(*rateLimiter)
	}
	n := float64(app.Limits.MaxAPIRequestsPerSecond)
	l, _ := s.limiters.LoadOrStore(app.ID, &rateLimiter{rate: guard.Rate{PerSecond: n, Burst: n}})
	return l.(*rateLimiter)
}

// take spends one request; when none is left it returns how long until one is.
func (l *rateLimiter) take(now time.Time) (time.Duration, bool) {
	if l.rate.Unlimited() {
		return 0, true
	}
	l.mu.Lock()
	ok, wait := l.b.Take(l.rate, now.UnixNano())
	l.mu.Unlock()
	return wait, ok
}
