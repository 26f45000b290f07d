// Package bench is herald's load generator: the named scenarios of docs/benchmark-scenarios.md
// (Idle, Fanout, Multichannel, Ramp, Churn, Publish, Recover for history channels, and Presence
// and Channels for a cluster's shared state), run against any Pusher-protocol server (herald, Sockudo, Soketi, bench/floor) over
// raw WebSockets and the signed REST API, reporting the same figures for each.
//
// The client is event-driven, like the server: a bounded pool of goroutines (Target.Concurrency)
// dials, upgrades, waits for connection_established and subscribes; the socket is then
// attached to a ws.Engine in client mode, whose pollers read every connection, so an open
// client costs a few hundred bytes and no goroutine. Each subscription keeps a bitmap of the
// sequence numbers it received, so delivery is counted exactly (missing, duplicated, out of
// order, unexpected); latency (publish → receive, the send time travels in the event) goes
// into HdrHistograms. Every phase runs under a deadline, so a server that refuses, closes or
// stays silent ends a run with an error instead of a hang. With Target.Procs the subscribers
// of Idle, Fanout and Multichannel are spread over child processes (RunChild) whose counts
// and histograms the parent merges. Presence clients sign their own joins and keep, each, a
// bitmap of the members of their channel they have seen (member.go), so every member seeing
// every other exactly once is counted as deliveries are.
//
// A target may be a cluster (nodes.go): Target.WS lists the nodes, connection i of a run goes
// to node i mod N (numbered over the whole run, children included), publishes go to the one
// node of Target.REST, and with one Target.ServerPIDs entry per node the server's CPU time is
// summed and its RSS reported per node.
//
// Scenarios may run concurrently with each other; a report is not safe for concurrent
// mutation.
package bench
