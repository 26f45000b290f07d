package metrics

import (
	"sync"
	"sync/atomic"
)

// HTTP counts REST calls per app; it implements httpapi.Meter. Counting is a map read and
// three atomic adds; an app's counters are made at its first call.
type HTTP struct {
	apps sync.Map // app id -> *httpCounters
}

type httpCounters struct {
	calls, received, transmitted atomic.Int64
}

// NewHTTP counts calls; the apps with these ids are listed (with zeros) from the start, the
// others from their first call (the API calls Call only for apps that exist).
func NewHTTP(appIDs []string) *HTTP {
	h := &HTTP{}
	for _, id := range appIDs {
		h.apps.Store(id, &httpCounters{})
	}
	return h
}

// counters returns app's counters, nil if it has had no call.
func (h *HTTP) counters(appID string) *httpCounters {
	if c, ok := h.apps.Load(appID); ok {
		return c.(*httpCounters)
	}
	return nil
}

// Call implements httpapi.Meter.
func (h *HTTP) Call(appID string, received, transmitted int64) {
	c := h.counters(appID)
	if c == nil {
		v, _ := h.apps.LoadOrStore(appID, &httpCounters{})
		c = v.(*httpCounters)
	}
	c.calls.Add(1)
	c.received.Add(received)
	c.transmitted.Add(transmitted)
}
