package httpapi

import (
	"net/http"
)

// TrustedEvents answers an event for the app appID as POST /apps/{id}/events does once its
// signature is checked: the same body, validation, errors, rate and answer. It is for a
// caller that authenticated the request itself (the console's event creator).
func (s *Server) TrustedEvents(rw http.ResponseWriter, r *http.Request, appID string) {
	app, err := s.lookup(appID)
	if err != nil {
		writeError(rw, err)
		return
	}
	cw := &countingWriter{ResponseWriter: rw}
	w := http.ResponseWriter(cw)
	defer s.metered(app.ID, r, cw)
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.takeRate(w, app); err != nil {
		writeError(w, err)
		return
	}
	s.events(w, &request{app: app, body: body, r: r})
}
