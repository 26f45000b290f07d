// Package session is the Pusher side of a herald node: the HTTP upgrade of /app/{key}, each
// connection's protocol messages (subscriptions with their auth, presence, client events,
// sign-in and watchlists, pings), the REST queries (channels, users) and the activity seam
// that webhooks and the console observe. It sits on the two layers below: the fan-out engine
// (fanout), which owns each connection's outbound queue and the subscribers of each channel,
// and the node's cluster.State, which holds what the node shares with the others of its
// cluster (its channels and their counts, presence members, signed-in users, cache
// channels' last events) and carries its publishes.
//
// A connection's read side (subscribe, unsubscribe, client events, sign-in) runs on the
// ws poller goroutine that reads it; it keeps the connection's own list of channels, so a
// disconnect touches only those. See LOCKS.md for the lock order.
//
// Server is safe for concurrent use. New starts its goroutines and those of its engine and
// state; Shutdown stops them.
package session
