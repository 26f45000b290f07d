package httpapi

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/lograte"
)

// refusalEvery is how often a refused REST request of one status may be logged.
const refusalEvery = 10 * time.Second

// refusalLog logs the signed requests of known apps refused with 401, 403, 413 or 429, at
// most one line every refusalEvery per status, with the app, the reason and a running total.
// Other refusals (400, 404, 5xx) are the caller's mistake or already logged where they arise.
type refusalLog struct {
	limits [4]lograte.Limit
	counts [4]atomic.Int64
}

// refusalSlot is where status's limit and count live, or -1 for a status not logged.
func refusalSlot(status int) int {
	switch status {
	case http.StatusUnauthorized:
		return 0
	case http.StatusForbidden:
		return 1
	case http.StatusRequestEntityTooLarge:
		return 2
	case http.StatusTooManyRequests:
		return 3
	}
	return -1
}

func (l *refusalLog) log(log *slog.Logger, now time.Time, appID string, r *http.Request, err error) {
	status := herald.CodeOf(err).HTTPStatus()
	i := refusalSlot(status)
	if i < 0 {
		return
	}
	n := l.counts[i].Add(1)
	if l.limits[i].Due(now.UnixMilli(), refusalEvery.Milliseconds()) {
		log.Warn("refusing REST requests", "app_id", appID, "status", status, "reason", herald.MessageOf(err),
			"method", r.Method, "path", r.URL.Path, "refused_total", n)
	}
}
