// Command herald-bench loads a Pusher-protocol server (herald, a cluster of herald nodes, or
// any other) with one of its scenarios and reports delivery, latency and the server's cost:
//
//	herald-bench <scenario> [flags]
//
// It is its own command so that the server does not link the load generator; "herald-bench"
// runs it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/herald-rt/herald/bench"
)

const benchUsage = `usage: herald-bench <scenario> [flags]

Scenarios (see docs/load-testing.md), against any Pusher-protocol server:
  idle          N idle subscribed connections; the server's and the generator's RSS per
                connection
  fanout        N subscribers on one channel, E events published through the REST API;
                delivery, publish→receive latency, server CPU per delivery
  multichannel  N subscribers over C channels; rounds of a burst of events to every channel;
                delivery, latency, deliveries/s, slow-consumer disconnects, server CPU
  ramp          connect at R conn/s up to T, every client on five market channels that get an
                event a second; every 10 s: attempts, active, failed, success, server CPU, RSS
  churn         S steady subscribers get 10 events/s while K clients a second connect,
                subscribe to 5 channels and disconnect; steady delivery, and whether the
                server's connections, channels and goroutines return to baseline
  publish       K concurrent publishers over keep-alive HTTP (events or batch_events) to
                channels with one subscriber each; accepted events/s, publish latency, delivery
  presence      N clients join presence channels of M members, each signing its own join;
                joins/s, join latency, whether every member saw every other exactly once,
                every node's user counts and no channel after they leave, server CPU per join
  channels      C subscribers on C channels, then K signed GET /channels on --rest;
                latency, and whether every answer lists exactly C channels
  recover       N clients on history channels all drop, miss M events during an outage and
                reconnect at once, resubscribing with recover; time until every one recovered
                every missed event once and in order, recovery latency, server CPU

A cluster: --ws takes the nodes' WebSocket URLs, comma-separated (connection i of the run goes
to node i mod N, also with --procs), --rest the one node publishes go to, --server-pid one
pid per node in the same order, --metrics one endpoint per node (summed).

Run "herald-bench <scenario> -h" for its flags. The exit status is 0 when the run was clean,
1 when it failed, measured nothing (no request, connection, cycle or expected delivery), or
any connection, delivery, order or presence member was lost or duplicated, a REST check
failed or a client did not recover, 2 for a usage error.
`

// version is set at build time with -ldflags "-X main.version=v1.2.3"; left empty,
// buildinfo.Version reads one from the binary's build information.
var version string

func main() {
	os.Exit(benchCmd(os.Args[1:], os.Stdout, os.Stderr))
}

// benchCmd runs one load scenario and prints its report: parseBench reads the flags into a
// benchJob, whose run starts the monitor and the scenario and writes the reports.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, benchUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	scenario, args := args[0], args[1:]
	if scenario == "child" { // hidden: one process of a run with --procs
		return benchChild(stdout, stderr)
	}
	job, code := parseBench(scenario, args, stderr)
	if job == nil {
		return code
	}
	return job.run(stdout, stderr)
}

// benchChild serves one process of a run with --procs on its standard input and output.
func benchChild(stdout, stderr io.Writer) int {
	if err := bench.RunChild(context.Background(), os.Stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "herald-bench child: %v\n", err)
		return 1
	}
	return 0
}
