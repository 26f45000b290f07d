// Package memory is the in-process cluster bus, for tests: a Bus that the Brokers of several
// simulated nodes attach to, routed by interest like the real engines, so that a cluster's
// tests (session's, cluster's, bench's) run in one process without a bus server. The herald
// binary does not link it: a single node has no bus (cluster.Local), a cluster's is NATS or
// Redis. Beside each Broker a History (NewHistory) keeps the history channels' events in the
// Bus's memory, shared by every node of the Bus as a Redis server's keys are. Everything
// here is safe for concurrent use.
package memory
