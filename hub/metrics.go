package hub

import (
	"sync/atomic"
	"time"
)

// counters are one app's counters on one worker. Each field has few writers: the fan-out
// worker writes the outbound ones, the accept path and the pollers the others, so no update
// is shared by all connections; a scrape sums them over workers.
type counters struct {
	// Written by the worker.
	disconnects atomic.Int64
	sent        atomic.Int64 // frames queued
	sentBytes   atomic.Int64 // bytes written to sockets
	slow        atomic.Int64
	_           [32]byte
	// Written by the accept path and the pollers.
	connects      atomic.Int64
	received      atomic.Int64 // WebSocket messages (data and control)
	receivedBytes atomic.Int64 // their payload bytes
	eventsLimited atomic.Int64 // client events over the rate
	_             [32]byte
}

// AppMetrics is one app's counters on this node. Counters only grow; Connections,
// Channels and Subscriptions are current values.
type AppMetrics struct {
	AppID               string
	Connections         int64
	NewConnections      int64
	Disconnections      int64
	MessagesSent        int64
	BytesSent           int64
	MessagesReceived    int64
	BytesReceived       int64
	SlowConsumers       int64
	ClientEventsLimited int64
	Channels            int64
	Subscriptions       int64
	CacheBytes          int64 // held by the last events of cache channels, see Config.CacheMaxBytesPerApp
	CacheEntries        int64
	CacheEvictions      int64 // last events dropped to stay within a bound (not TTL expiries)
}

// AppMetrics returns every app's counters, summed over workers.
func (f *core) AppMetrics() []AppMetrics {
	out := make([]AppMetrics, 0, len(f.apps))
	for _, a := range f.apps {
		m := AppMetrics{
			AppID:         a.app.ID,
			Connections:   a.conns.Load(),
			Channels:      a.channels.count.Load(),
			Subscriptions: a.channels.subs.Load(),

			CacheBytes:     a.cache.bytes.Load(),
			CacheEntries:   a.cache.entries.Load(),
			CacheEvictions: a.cache.evictions.Load(),
		}
		for i := range a.counters {
			c := &a.counters[i]
			m.NewConnections += c.connects.Load()
			m.Disconnections += c.disconnects.Load()
			m.MessagesSent += c.sent.Load()
			m.BytesSent += c.sentBytes.Load()
			m.MessagesReceived += c.received.Load()
			m.BytesReceived += c.receivedBytes.Load()
			m.SlowConsumers += c.slow.Load()
			m.ClientEventsLimited += c.eventsLimited.Load()
		}
		out = append(out, m)
	}
	return out
}

// Refusal is why a connection was refused at the handshake.
type Refusal uint8

// Refusal reasons, the label values of herald_refused_connections_total.
const (
	RefusedAppNotFound Refusal = iota
	RefusedDraining
	RefusedOrigin
	RefusedIPRate
	RefusedMemory
	RefusedNodeFull
	RefusedAppFull
	refusalCount
)

var refusalNames = [refusalCount]string{"app_not_found", "draining", "origin", "ip_rate", "memory", "node_full", "app_full"}

// String is the reason's metric label.
func (r Refusal) String() string { return refusalNames[r] }

// Refusals returns how many connections were refused for each reason, indexed by Refusal.
func (h *Hub) Refusals() []int64 {
	out := make([]int64, refusalCount)
	for i := range out {
		out[i] = h.refusals[i].Load()
	}
	return out
}

// QueueDepths returns how many commands wait in each worker's inbox.
func (f *core) QueueDepths() []int {
	out := make([]int, len(f.workers))
	for i, w := range f.workers {
		out[i] = len(w.inbox)
	}
	return out
}

// Observer receives one measurement; prometheus.Observer satisfies it.
type Observer interface{ Observe(float64) }

// latencies are the observers of an app's publishes.
type latencies struct {
	publish Observer // publish → last frame queued; nil: not measured
	origin  Observer // an event's origin → last frame queued; nil: not measured
}

// measure says what one publish's pubTrack observes; its zero value observes nothing.
// (A pointer to the app's latencies rather than a copy: pubTrack, allocated per observed
// publish, stays in the 32-byte size class.)
type measure struct {
	lat *latencies
	at  int64 // the event's origin, Unix nanoseconds; 0: none, or lat.origin is nil
}

// pubTrack measures one publish until its last frame is queued: each worker that has
// subscribers takes one count, and the last one observes the elapsed times: one time.Now
// per event with an origin, nothing per recipient.
type pubTrack struct {
	start int64 // monotonic nanoseconds, see mono
	left  atomic.Int32
	measure
}

func (t *pubTrack) done() {
	if t == nil || t.left.Add(-1) != 0 {
		return
	}
	if t.lat.publish != nil {
		t.lat.publish.Observe(float64(mono()-t.start) / 1e9)
	}
	if t.at != 0 {
		// A producer's clock ahead of this node's would give a negative time: 0.
		t.lat.origin.Observe(float64(max(time.Now().UnixNano()-t.at, 0)) / 1e9)
	}
}

// epoch anchors mono, a monotonic clock in nanoseconds.
var epoch = time.Now()

func mono() int64 { return int64(time.Since(epoch)) }
