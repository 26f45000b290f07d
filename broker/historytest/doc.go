// Package historytest is the one conformance suite of the herald.History contract. Every
// engine (memory, nats, redis) runs it from its tests with a factory that builds several
// nodes, each a Broker and the History beside it, on one bus and one history store:
// historytest.Run(t, newCluster). Real engines run it against a real server started by the
// test (internal/servicetest) and hand it the means to lose the server's data and to stop
// it.
package historytest
