// Package cluster is the layer between the Pusher session and the fan-out engine: what a
// node shares with the other nodes of its cluster, behind one contract, State, with two
// implementations. NewLocal is a single node: everything in memory, its publishes delivered
// to its own subscribers at once. NewReplicated is a node of a cluster on a herald.Broker:
// a channel's first local subscriber takes the node's interest in it on the bus (its
// subscribers wait for it, see Gate), every publish goes through the bus, which brings it
// back to every node with interest, this one included, so all nodes deliver one channel's
// events in one order; and each node streams its share of the state (subscription counts,
// presence members, signed-in users, cache channels' last events) to the others, who keep a
// copy and answer from it (stream.go).
//
// The layer owns each app's channel table (the channels with local subscribers), the
// presence member lists (local and remote), the last events of cache channels and the
// node's interest on the bus. It speaks to the engine (fanout) and to the broker only; what
// the session above must do about the other nodes' changes (tell local members of a remote
// join, a watcher of a remote sign-in) it learns through the Listener it starts the state
// with.
//
// Every State is safe for concurrent use. See LOCKS.md for the lock order.
package cluster
