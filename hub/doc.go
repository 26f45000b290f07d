// Package hub is herald's fan-out core: connections, channels, presence, the cache of cache
// channels, and the workers that deliver events.
//
// A fixed pool of workers (about one per core) owns the connections: each connection belongs
// to one worker, which alone queues frames for it and writes them, once per batch, with one
// writev. Every channel keeps, per worker, the list of that worker's subscribers, and only the
// worker reads or changes it, so a broadcast takes no lock, copies nothing and allocates
// nothing per recipient: the publisher encodes the event once into a WebSocket frame and
// sends one command per interested worker. Commands to a worker are processed in order, which
// keeps per-channel publish order for every subscriber.
//
// A connection's read side (subscribe, unsubscribe, client events, sign-in) runs on the
// ws poller goroutine that reads it; it keeps the connection's own list of channels, so a
// disconnect touches only those. See LOCKS.md for the lock order.
//
// Hub is safe for concurrent use. New starts its goroutines; Shutdown stops them.
package hub
