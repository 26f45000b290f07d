package metrics

import "sync/atomic"

// HTTP counts REST calls per app; it implements httpapi.Meter. Its app table is fixed at
// construction, so counting is a map read and three atomic adds.
type HTTP struct {
	apps map[string]*httpCounters
}

type httpCounters struct {
	calls, received, transmitted atomic.Int64
}

// NewHTTP counts calls for the apps with these ids; calls for other ids are not counted.
func NewHTTP(appIDs []string) *HTTP {
	h := &HTTP{apps: make(map[string]*httpCounters, len(appIDs))}
	for _, id := range appIDs {
		h.apps[id] = &httpCounters{}
	}
	return h
}

// Call implements httpapi.Meter.
func (h *HTTP) Call(appID string, received, transmitted int64) {
	if c := h.apps[appID]; c != nil {
		c.calls.Add(1)
		c.received.Add(received)
		c.transmitted.Add(transmitted)
	}
}
