package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/herald-rt/herald/bench"
)

const benchUsage = `usage: herald bench <scenario> [flags]

Scenarios (see BENCHMARKS.md), against any Pusher-protocol server:
  idle     N idle subscribed connections; the server's RSS per connection
  fanout   N subscribers on one channel, E events published through the REST API;
           delivery, publish→receive latency, server CPU per delivery

Run "herald bench <scenario> -h" for its flags. The exit status is 0 when the run was clean,
1 when it failed or any connection, delivery or order was lost, 2 for a usage error.
`

// benchCmd runs one load scenario and prints its report.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, benchUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	scenario, args := args[0], args[1:]
	fs := flag.NewFlagSet("herald bench "+scenario, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t bench.Target
	fs.StringVar(&t.WS, "ws", "ws://127.0.0.1:6001", "WebSocket base URL of the server")
	fs.StringVar(&t.REST, "rest", "http://127.0.0.1:6001", "REST base URL of the server")
	fs.StringVar(&t.AppID, "app-id", "app-id", "app id")
	fs.StringVar(&t.Key, "key", "app-key", "app key")
	fs.StringVar(&t.Secret, "secret", "app-secret", "app secret")
	fs.IntVar(&t.ServerPID, "server-pid", 0, "server process id, to report its CPU time and RSS from /proc (0: not reported)")
	fs.DurationVar(&t.Timeout, "timeout", 60*time.Second, "deadline of every phase")
	fs.IntVar(&t.Concurrency, "concurrency", 200, "connection attempts in flight at once")
	fs.Float64Var(&t.Rate, "rate", 0, "connection attempts per second (0: as fast as possible)")
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")

	var run func(ctx context.Context) (any, bool, error)
	switch scenario {
	case "idle":
		cfg := bench.IdleConfig{}
		fs.IntVar(&cfg.Conns, "conns", 1000, "connections")
		fs.IntVar(&cfg.Channels, "channels", 10, "public channels the connections are spread over")
		fs.DurationVar(&cfg.Hold, "hold", 0, "keep the connections open this long after measuring")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target = t
			rep, err := bench.Idle(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			return rep, rep.Setup.Failed == 0 && rep.Lost.Count == 0, nil
		}
	case "fanout":
		cfg := bench.FanoutConfig{}
		fs.IntVar(&cfg.Subs, "subs", 1000, "subscribers on the channel")
		fs.IntVar(&cfg.Events, "events", 5, "events to publish")
		fs.DurationVar(&cfg.Interval, "interval", 3*time.Second, "time between publishes")
		fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
		fs.StringVar(&cfg.Channel, "channel", "fanout", "channel name")
		fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target = t
			rep, err := bench.Fanout(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			d := rep.Delivery
			clean := rep.Setup.Failed == 0 && rep.Lost.Count == 0 && d.Missing == 0 && d.Duplicated == 0 && d.OutOfOrder == 0 && d.Unexpected == 0
			return rep, clean, nil
		}
	default:
		fmt.Fprintf(stderr, "herald bench: unknown scenario %q (scenarios: idle, fanout)\n", scenario)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "herald bench %s: unexpected arguments %q\n", scenario, fs.Args())
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, clean, err := run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "herald bench %s: %v\n", scenario, err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.(interface{ WriteText(io.Writer) error }).WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "herald bench %s: write report: %v\n", scenario, err)
		return 1
	}
	if !clean {
		fmt.Fprintf(stderr, "herald bench %s: the run was not clean: see failures, lost connections or deliveries above\n", scenario)
		return 1
	}
	return 0
}
