// Package kafka is the Kafka ingest source: a consumer group (franz-go) that hands each
// poll's records, in order, to an ingest.Pipeline and commits their offsets only once the
// pipeline reports them done, so every record reaches the server at least once. All nodes of a
// cluster join one group: each partition is consumed by one node at a time, in order, and
// a node that leaves hands its partitions to the others.
//
// Memory is bounded whatever the producer's rate: one fetch in flight or buffered
// (FetchMaxBytes), one poll of at most PollRecords records in hand, and no poll while the
// server refuses events.
//
// A Source's goroutines are started by Start and stopped by Close.
package kafka
