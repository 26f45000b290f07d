// Package hub is one herald node: the Pusher session side (Hub: the HTTP upgrade, each
// connection's protocol messages, subscriptions, presence, users and the REST queries) on
// top of the fan-out core (core: the workers, each channel's subscribers, the cache of cache
// channels, publishing and the cluster bus). The session side decides who subscribes to
// what; the core delivers and calls nothing of the session side.
//
// In a cluster the bus plugs into the core in one place, cluster.go: a channel's first local
// subscriber takes the node's interest on the bus (its subscribers are confirmed once the bus
// has it), its last one drops it, and every publish goes through the bus, which brings it
// back to every node with interest, this one included, so all nodes deliver one channel's
// events in one order.
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
