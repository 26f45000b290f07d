// Package ingesttest is the one conformance suite of the ingest.Source contract. Every source
// (ingest/kafka; ingest/redis in its stream and its pub/sub mode) runs it from its tests with
// a factory of harnesses, each a topic of its own on a running broker that the suite can
// write records to, build sources of, and stop and start: ingesttest.Run(t, newSource). A
// source declares the promises it keeps beyond every source's (Capabilities); the cases that
// need one it lacks are skipped, naming it.
//
// It also holds what those tests share: a publisher that keeps the events it takes (Sink), the
// pipeline they feed, a deadline for Close, and checks of what arrived. Sink is safe for
// concurrent use.
package ingesttest
