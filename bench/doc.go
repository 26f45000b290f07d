// Package bench is herald's load generator: named scenarios from BENCHMARKS.md, run against any
// Pusher-protocol server (herald, Sockudo, Soketi, tools/floor) over raw WebSockets and the
// signed REST API, reporting the same figures for each.
//
// This first increment has two scenarios: Idle (N subscribed idle connections; server RSS per
// connection) and Fanout (N subscribers on one channel; publish → receive latency, delivery
// counted by exact sequence number, server CPU per delivery). Each client connection is one
// goroutine that owns its socket; every phase runs under a deadline, so a server that refuses,
// closes or stays silent ends a run with an error instead of a hang.
//
// Idle and Fanout may run concurrently with each other; a Report is not safe for concurrent
// mutation.
package bench
