// Package nats is the cluster bus on NATS (github.com/nats-io/nats.go, core NATS, at most
// once). Each (app, channel) a node has interest in is one subscription to the subject
// broker.Subject(prefix, app, channel); publishes are written to the connection's buffered
// writer and flushed by nats.go's flusher, so concurrent publishes share writes and none
// waits for a round trip. Flush waits for one: a goroutine of the broker makes one PING/PONG
// round trip for every Flush waiting when it begins, so concurrent callers share it. A node
// receives its own messages on the subjects it has interest in, like every other node. On a
// lost connection nats.go reconnects forever with this package's backoff and, before
// anything else, sends the server every subscription the connection holds - including
// those taken while it was down - so interests are restored without the broker's help
// (brokertest's outage case checks it).
//
// Beside a Broker, a History (NewHistory) keeps the history channels' events in JetStream
// streams on the same connection (the server must run JetStream: nats-server -js), and
// publishes them with their positions through the Broker: see History.
//
// A Broker is safe for concurrent use.
package nats
