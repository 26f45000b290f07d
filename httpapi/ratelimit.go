package httpapi

import (
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
)

// rateLimiter is one app's REST request rate on this node. Its mutex is the app's alone.
type rateLimiter struct {
	app  *herald.App // the app it was made for: a changed app is a new one, with a new rate
	rate guard.Rate
	mu   sync.Mutex
	b    guard.Bucket
}

// limiter returns app's rate limiter, creating it on first use.
func (s *Server) limiter(app *herald.App) *rateLimiter {
	if l, ok := s.limiters.Load(app.ID); ok && l.(*rateLimiter).app == app {
		return l.(*rateLimiter)
	}
	// New, or its app changed (an app store hands out a new App for each change): a new
	// rate, from a full bucket.
	n := float64(app.Limits.MaxAPIRequestsPerSecond)
	l := &rateLimiter{app: app, rate: guard.Rate{PerSecond: n, Burst: n}}
	s.limiters.Store(app.ID, l)
	return l
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
