// Package brokertest is the one conformance suite of the herald.Broker contract. Every engine
// (memory, nats, redis) runs it from its tests with a factory that builds several connected
// brokers on one bus: brokertest.Run(t, newCluster). Real engines also hand it the means to
// stop and restart their bus server, for the outage cases.
package brokertest
