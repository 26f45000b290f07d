// Package ingesttest holds what the tests of ingest's sources (ingest/kafka, ingest/redis)
// share: a hub that keeps the events it takes (Sink), the pipeline they feed, a deadline for
// Close, and checks of what arrived. Sink is safe for concurrent use.
package ingesttest
