package main

import (
	"net/http"
	"sync/atomic"
)

// lateHandler is a handler that a component starting after the listener that serves it
// provides once started (the console's pages, the detailed /health, both on the metrics
// listener, which starts before them): the root builds it, hands it to the listener and to
// the component, and until the component sets it, it answers with starting.
type lateHandler struct {
	starting http.Handler
	h        atomic.Pointer[http.Handler]
}

// newLateHandler returns a lateHandler that answers with starting until set.
func newLateHandler(starting http.HandlerFunc) *lateHandler {
	return &lateHandler{starting: starting}
}

// set makes h the handler from now on; the component that provides it calls it once started.
func (l *lateHandler) set(h http.Handler) { l.h.Store(&h) }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	l.starting.ServeHTTP(w, r)
}
