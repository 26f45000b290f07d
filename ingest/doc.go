// Package ingest turns records of an external log (a Kafka topic, a Redis stream or pub/sub
// channel) into events published to an app's channels, through the same publish path as the
// REST API (the session server's Publish, which in a cluster hands them to the bus).
//
// It owns what every source shares: the templates that name each record's channel, event and
// data (compiled and checked at configuration time), the pusher format (each record a REST
// events body), the classification of bad records (counted by reason, logged at most once a
// second, skipped and, optionally, sent to a dead-letter topic or stream), the hand-off to the
// server with backpressure (a refused publish is retried, never dropped, and the source fetches
// nothing more meanwhile), the source's counters for metrics and /health, and its lifecycle
// (Lifecycle: Start, Close, Stats; Backoff between reconnections).
//
// A source (ingest/kafka, ingest/redis) fetches records, hands them to Pipeline.Handle in
// order and commits (or acknowledges) only the records Handle reports done: at least once.
//
// Pipeline is safe for concurrent use by one source goroutine and any number of Stats readers.
package ingest
