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
// Past one server (Config.URL, ParseTopology), the broker holds one shard per standalone
// server, per channel group of a Redis Cluster (SSUBSCRIBE and SPUBLISH, the group's names
// sharing one hash slot) or one for a primary found through Sentinel. A channel's interest,
// publishes and history go to the shard that holds it (place.go: rendezvous hashing); the
// internal keys likewise, so every node finds them on one shard. Received messages of every
// shard go to one delivery goroutine.
//
// Each shard's supervisor goroutine owns its connections: when the subscriber connection is
// lost the shard reports not connected (Shards; Connected follows the shard of the internal
// keys), and the supervisor reconnects forever with capped backoff, SUBSCRIBEs every interest
// of the shard again before it reports connected, and carries on. Only the channels of a
// shard that is down fail meanwhile.
//
// Redis pub/sub is at most once: messages published while a node's subscriber connection is
// down are not replayed, and Redis itself disconnects a subscriber that falls behind its
// client-output-buffer-limit for pubsub (then the supervisor reconnects as after any loss).
//
// Beside a Broker, a History (NewHistory) keeps the history channels' events on the same
// server, and publishes them with their positions from a script: see History.
//
// A Broker is safe for concurrent use.
package redis
