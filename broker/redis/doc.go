// Package redis is the cluster bus on Redis pub/sub (github.com/redis/rueidis, chosen over
// go-redis by measurement: see docs/benchmarks.md). Each (app, channel) a node has interest in is
// one SUBSCRIBE to broker.Subject(prefix, app, channel) on a dedicated connection; Subscribe
// returns after Redis's reply. Publish queues the encoded message for one writer goroutine
// that sends whatever has queued as one pipeline of PUBLISH commands (one round trip for
// many events) on the client's own connection, so one node's publishes reach Redis, and
// every subscriber, in order. Flush queues a marker behind the publishes and returns when
// the pipeline carrying them has been answered: markers ride with the publishes and cost no
// round trip of their own. A node receives its own messages on the channels it has
// interest in, like every other node.
//
// A supervisor goroutine owns the connections: when the subscriber connection is lost the
// broker reports not connected, and the supervisor reconnects forever with capped backoff,
// SUBSCRIBEs every interest again before it reports connected, and carries on.
//
// Redis pub/sub is at most once: messages published while a node's subscriber connection is
// down are not replayed, and Redis itself disconnects a subscriber that falls behind its
// client-output-buffer-limit for pubsub (then the supervisor reconnects as after any loss).
// One Redis server (or a replica set's primary) is expected, not Redis Cluster.
//
// Beside a Broker, a History (NewHistory) keeps the history channels' events on the same
// server, and publishes them with their positions from a script: see History.
//
// A Broker is safe for concurrent use.
package redis
