// Package statetest is the conformance suite of cluster.State: Run(t, newCluster) drives
// every case of the contract, as the Pusher session uses it, against the States a factory
// builds, on real fan-out engines with recording transports. cluster.NewLocal (a single
// node) and cluster.NewReplicated (on the memory, NATS and Redis buses) all pass it; the
// cases that need more than one node skip for an implementation that cannot form a cluster.
package statetest
