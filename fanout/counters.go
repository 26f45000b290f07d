package fanout

import "sync/atomic"

// Counters are one group's counters on one worker. Each field has few writers (the worker
// the outbound ones, the accept path and the readers the others), so no update is shared by
// all connections; a scrape sums them over workers.
type Counters struct {
	// Written by the worker.
	Disconnects atomic.Int64
	Sent        atomic.Int64 // frames queued
	SentBytes   atomic.Int64 // bytes written to sockets
	Slow        atomic.Int64 // slow consumers closed
	g           *Group       // whose counters these are; read only, in the padding
	// ReplayedBytes and ReplayPages count the replays' frames queued (Engine.SubscribeReplay),
	// in bytes and in pages.
	ReplayedBytes atomic.Int64
	ReplayPages   atomic.Int64
	Writes        atomic.Int64 // write calls to sockets (writev), each of one or more frames
	// Written by the accept path and the readers.
	Connects      atomic.Int64
	Received      atomic.Int64 // messages received (data and control)
	ReceivedBytes atomic.Int64 // their payload bytes
	EventsLimited atomic.Int64 // client events refused over their rate
	// SubscribesLimited counts subscriptions refused over their rate.
	SubscribesLimited atomic.Int64
	_                 [24]byte
}

// Group is the connections of one tenant (an app): their count, their counters by worker and
// the latencies their publishes observe. The layer above makes one per app with NewGroup.
type Group struct {
	id       string
	conns    atomic.Int64
	counters []Counters // by worker
	lat      Latencies
}

// ID is the group's name (the app id), in logs.
func (g *Group) ID() string { return g.id }

// Conns is how many of the group's connections are open (claimed and not yet gone).
func (g *Group) Conns() int64 { return g.conns.Load() }

// Claim counts one more connection of the group and returns the count; Engine.Unclaim
// undoes it for a connection that never reaches a worker.
func (g *Group) Claim() int64 { return g.conns.Add(1) }

// Counters returns the group's counters, one per worker, to sum.
func (g *Group) Counters() []Counters { return g.counters }

// Measure is what one publish of the group observes, given the event's origin (Unix
// nanoseconds, 0: none).
func (g *Group) Measure(origin int64) Measure {
	m := Measure{lat: &g.lat}
	if g.lat.Origin != nil {
		m.at = origin
	}
	return m
}
