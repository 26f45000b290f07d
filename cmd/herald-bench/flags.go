package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/herald-rt/herald/bench"
)

// benchJob is one `herald-bench <scenario>` run as its flags describe it.
type benchJob struct {
	scenario    string
	args        []string // as given, for the HTML report's command line
	scenarioRun benchRunner
	target      bench.Target
	watch       bench.MonitorConfig
	pids        string // --server-pid, as given
	busPIDs     string // --bus-pid, as given
	asJSON      bool
	quiet       bool
	htmlPath    string
}

// parseBench parses the flags of scenario: the ones every scenario shares, then its own. It
// returns the job, or nil and the exit status, having said why on stderr.
func parseBench(scenario string, args []string, stderr io.Writer) (*benchJob, int) {
	define, ok := benchScenarios[scenario]
	if !ok {
		fmt.Fprintf(stderr, "herald-bench: unknown scenario %q (scenarios: idle, fanout, multichannel, ramp, churn, publish, presence, channels, recover)\n", scenario)
		return nil, 2
	}
	fs := flag.NewFlagSet("herald-bench "+scenario, flag.ContinueOnError)
	fs.SetOutput(stderr)
	j := &benchJob{scenario: scenario, args: args}
	j.define(fs)
	j.scenarioRun = define(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "herald-bench %s: unexpected arguments %q\n", scenario, fs.Args())
		return nil, 2
	}
	if code, err := j.checkTarget(); err != nil {
		fmt.Fprintf(stderr, "herald-bench %s: %v\n", scenario, err)
		return nil, code
	}
	return j, 0
}

// define defines the flags every scenario shares.
func (j *benchJob) define(fs *flag.FlagSet) {
	t := &j.target
	fs.StringVar(&t.WS, "ws", "ws://127.0.0.1:6001", "WebSocket base URL of the server or, comma-separated, of each node of a cluster (`urls`): connection i of the run goes to node i mod N")
	fs.StringVar(&t.REST, "rest", "http://127.0.0.1:6001", "REST base URL of the node every publish goes to (one URL, also with several --ws nodes; multichannel --spread-publishes posts to every node instead)")
	fs.StringVar(&t.Publish, "publish", "", "send the events to Kafka (kafka://host:port/topic) or Redis (redis://host:port/db?stream=name or ?channel=name) instead of the REST API, one pusher-format record per event, for a herald ingest source with format: pusher; latency is then produce → client")
	fs.StringVar(&t.CAFile, "ca-file", "", "PEM roots trusted for wss:// and https:// besides the system's (a server whose certificate a private CA signed)")
	fs.StringVar(&t.AppID, "app-id", "app-id", "app id")
	fs.StringVar(&t.Key, "key", "app-key", "app key")
	fs.StringVar(&t.Secret, "secret", "app-secret", "app secret")
	fs.StringVar(&j.pids, "server-pid", "", "server process id, to report its CPU time and RSS from /proc; or one per --ws node, comma-separated in the same order (`pids`): CPU summed, RSS per node and in total (empty or 0: not reported)")
	fs.StringVar(&j.busPIDs, "bus-pid", "", "a cluster's bus server processes (nats-server, redis-server), comma-separated (`pids`): their CPU time over the scenario's window is added to the server's and reported apart (needs --server-pid)")
	fs.DurationVar(&t.Timeout, "timeout", 60*time.Second, "deadline of every phase")
	fs.IntVar(&t.Concurrency, "concurrency", 200, "connection attempts in flight at once")
	fs.Float64Var(&t.Rate, "rate", 0, "connection attempts per second (0: as fast as possible; ramp's default 500, churn's 1000 cycles/s)")
	fs.DurationVar(&t.ActivityTimeout, "activity-timeout", bench.DefaultActivityTimeout, "the clients' own activity timeout, pusher-js's activityTimeout option (idle, fanout, multichannel): a client that received nothing this long, or for the server's activity_timeout when shorter, sends pusher:ping (negative: clients never ping first)")
	fs.IntVar(&t.Sources, "sources", 0, "loopback source addresses the clients of a loopback target connect from, client i always from the (i mod N)-th after 127.0.0.0, so that the server sees that many client addresses (per-address limits and budgets); 0: 8")
	fs.IntVar(&t.Procs, "procs", 1, "client processes the connections are spread over (idle, fanout, multichannel); each holds at most about 19,900")
	fs.BoolVar(&j.asJSON, "json", false, "print one JSON document instead of text")
	fs.BoolVar(&j.quiet, "quiet", false, "no live progress line on the terminal (it is also off with --json or when stderr is not a terminal)")
	fs.StringVar(&j.htmlPath, "report", "", "also write a self-contained HTML report (plots over time and the summary) to this file")
	fs.StringVar(&t.Metrics, "metrics", "", "the server's Prometheus endpoint, or one per node comma-separated (`urls`, summed), read before, each second during and after the run (herald, Soketi, Sockudo: http://127.0.0.1:9601/metrics); churn without it reads /health on --rest, or on every --ws node (ws→http) with several")
	fs.StringVar(&j.watch.MetricsPrefix, "metrics-prefix", "herald_", "prefix of the server's <prefix>connected and <prefix>channels series")
}

// checkTarget completes the target from the parsed flags (the server's pids, the child
// command of --procs) and checks it before any load: --ws, --server-pid, --metrics. On an
// error it returns the exit status too.
func (j *benchJob) checkTarget() (int, error) {
	var err error
	if j.target.ServerPIDs, err = bench.ParsePIDs(j.pids); err != nil {
		return 2, err
	}
	if j.target.BusPIDs, err = bench.ParseBusPIDs(j.busPIDs); err != nil {
		return 2, err
	}
	if j.target.Procs > 1 {
		exe, err := os.Executable()
		if err != nil {
			return 1, fmt.Errorf("--procs: %w", err)
		}
		j.target.Child = []string{exe, "child"}
	}
	if err := j.target.Check(); err != nil {
		return 2, err
	}
	return 0, nil
}
