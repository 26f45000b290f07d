package httpapi

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/herald-rt/herald"
)

// TrustedEvents answers an event for the app appID as POST /apps/{id}/events does once its
// signature is checked: the same body, validation, errors, rate and answer. It is for a
// caller that authenticated the request itself (the console's event creator).
func (s *Server) TrustedEvents(rw http.ResponseWriter, r *http.Request, appID string) {
	app, ok := s.apps.AppByID(appID)
	if !ok {
		writeError(rw, herald.Errorf(herald.CodeAppNotFound, "app %q does not exist", appID))
		return
	}
	cw := &countingWriter{ResponseWriter: rw}
	w := http.ResponseWriter(cw)
	defer func() {
		if s.meter != nil {
			s.meter.Call(app.ID, max(r.ContentLength, 0), cw.n)
		}
	}()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, herald.Errorf(herald.CodeTooLarge, "request body over %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		writeError(w, herald.Errorf(herald.CodeInvalid, "read body: %v", err))
		return
	}
	if wait, ok := s.limiter(app).take(s.now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		writeError(w, herald.Errorf(herald.CodeRateLimited, "app %s is over its rate of %d API requests per second",
			app.ID, app.Limits.MaxAPIRequestsPerSecond))
		return
	}
	s.events(w, &request{app: app, body: body, r: r})
}
