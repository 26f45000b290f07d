package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/herald-rt/herald/bench"
)

const benchUsage = `usage: herald bench <scenario> [flags]

Scenarios (see BENCHMARKS.md), against any Pusher-protocol server:
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

A cluster: --ws takes the nodes' WebSocket URLs, comma-separated (connection i of the run goes
to node i mod N, also with --procs), --rest the one node publishes go to, --server-pid one
pid per node in the same order, --metrics one endpoint per node (summed).

Run "herald bench <scenario> -h" for its flags. The exit status is 0 when the run was clean,
1 when it failed, measured nothing (no request, connection, cycle or expected delivery), or
any connection, delivery, order or presence member was lost or duplicated, or a REST check
failed, 2 for a usage error.
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
	if scenario == "child" { // hidden: one process of a run with --procs
		if err := bench.RunChild(context.Background(), os.Stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "herald bench child: %v\n", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("herald bench "+scenario, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var t bench.Target
	fs.StringVar(&t.WS, "ws", "ws://127.0.0.1:6001", "WebSocket base URL of the server or, comma-separated, of each node of a cluster (`urls`): connection i of the run goes to node i mod N")
	fs.StringVar(&t.REST, "rest", "http://127.0.0.1:6001", "REST base URL of the node every publish goes to (one URL, also with several --ws nodes)")
	fs.StringVar(&t.Publish, "publish", "", "send the events to Kafka (kafka://host:port/topic) or Redis (redis://host:port/db?stream=name or ?channel=name) instead of the REST API, one pusher-format record per event, for a herald ingest source with format: pusher; latency is then produce → client")
	fs.StringVar(&t.AppID, "app-id", "app-id", "app id")
	fs.StringVar(&t.Key, "key", "app-key", "app key")
	fs.StringVar(&t.Secret, "secret", "app-secret", "app secret")
	pids := fs.String("server-pid", "", "server process id, to report its CPU time and RSS from /proc; or one per --ws node, comma-separated in the same order (`pids`): CPU summed, RSS per node and in total (empty or 0: not reported)")
	fs.DurationVar(&t.Timeout, "timeout", 60*time.Second, "deadline of every phase")
	fs.IntVar(&t.Concurrency, "concurrency", 200, "connection attempts in flight at once")
	fs.Float64Var(&t.Rate, "rate", 0, "connection attempts per second (0: as fast as possible; ramp's default 500, churn's 1000 cycles/s)")
	fs.IntVar(&t.Procs, "procs", 1, "client processes the connections are spread over (idle, fanout, multichannel); each holds at most about 19,900")
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")
	quiet := fs.Bool("quiet", false, "no live progress line on the terminal (it is also off with --json or when stderr is not a terminal)")
	htmlPath := fs.String("report", "", "also write a self-contained HTML report (plots over time and the summary) to this file")
	var watch bench.MonitorConfig
	fs.StringVar(&t.Metrics, "metrics", "", "the server's Prometheus endpoint, or one per node comma-separated (`urls`, summed), read before, each second during and after the run (herald, Soketi, Sockudo: http://127.0.0.1:9601/metrics); churn without it reads /health on --rest, or on every --ws node (ws→http) with several")
	fs.StringVar(&watch.MetricsPrefix, "metrics-prefix", "herald_", "prefix of the server's <prefix>connected and <prefix>channels series")

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
	case "multichannel":
		cfg := bench.MultichannelConfig{}
		fs.IntVar(&cfg.Subs, "subs", 19000, "subscribers in all, spread round robin over the channels")
		fs.IntVar(&cfg.Channels, "channels", 40, "channels")
		fs.IntVar(&cfg.Burst, "burst", 10, "events published to every channel per round")
		fs.IntVar(&cfg.Rounds, "rounds", 5, "rounds")
		fs.DurationVar(&cfg.Interval, "interval", time.Second, "time between the starts of rounds")
		fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
		fs.DurationVar(&cfg.Wait, "wait", 10*time.Second, "after the last publish, how long to wait for every delivery")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target = t
			rep, err := bench.Multichannel(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			return rep, rep.Setup.Failed == 0 && rep.Lost.Count == 0 && rep.Delivery.Clean(), nil
		}
	case "ramp":
		cfg := bench.RampConfig{}
		fs.IntVar(&cfg.Conns, "conns", 15000, "connections to reach, at --rate (default 500/s)")
		channels := fs.String("channels", strings.Join(bench.DefaultRampChannels, ","), "channels every client joins, comma-separated")
		fs.DurationVar(&cfg.EventEvery, "event-every", time.Second, "the publisher sends one event to every channel this often")
		fs.DurationVar(&cfg.Hold, "hold", 10*time.Second, "after the last connection attempt, how long the run goes on")
		fs.DurationVar(&cfg.Every, "every", 10*time.Second, "report interval")
		fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
		fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target, cfg.Channels = t, strings.Split(*channels, ",")
			rep, err := bench.Ramp(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			clean := rep.Setup.Failed == 0 && rep.Lost.Count == 0 && rep.PublishFailures == 0 && rep.Delivery.Clean()
			return rep, clean, nil
		}
	case "churn":
		cfg := bench.ChurnConfig{}
		fs.IntVar(&cfg.Steady, "steady", 1000, "steady subscribers")
		fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long cycles run, at --rate (default 1000/s)")
		fs.IntVar(&cfg.PerClient, "per-client", 5, "channels each cycle subscribes to")
		fs.Float64Var(&cfg.EventRate, "event-rate", 10, "events per second to the steady subscribers")
		fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
		fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
		fs.DurationVar(&cfg.Settle, "settle", 30*time.Second, "how long the server has to return to its baseline counts")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target = t
			rep, err := bench.Churn(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			c, s := rep.Cycles, rep.ServerState
			clean := rep.Setup.Failed == 0 && rep.Lost.Count == 0 && rep.Delivery.Clean() && rep.PublishFailures == 0 &&
				c.Failed == 0 && c.CloseUnanswered == 0 && (s == nil || s.Returned)
			return rep, clean, nil
		}
	case "publish":
		cfg := bench.PublishConfig{}
		fs.IntVar(&cfg.Publishers, "publishers", 8, "concurrent publishers")
		fs.IntVar(&cfg.Channels, "channels", 100, "channels, one subscriber each")
		fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long the publishers publish")
		fs.IntVar(&cfg.Batch, "batch", 0, "events per batch_events request (0: one event per /events request; at most 10)")
		fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
		fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target = t
			rep, err := bench.Publish(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			return rep, rep.FailedRequests == 0 && rep.Lost.Count == 0 && rep.Delivery.Clean(), nil
		}
	case "presence":
		cfg := bench.PresenceConfig{}
		fs.IntVar(&cfg.Clients, "clients", 3000, "members in all, one connection each; client i joins channel i / --per-channel")
		fs.IntVar(&cfg.PerChannel, "per-channel", 100, "members per presence channel")
		fs.DurationVar(&cfg.Wait, "wait", 10*time.Second, "after the last join, how long every member has to see every other")
		restCheck := fs.Bool("rest-check", true, "ask every node's /channels for the user counts with every member joined, and for no channel after they leave")
		fs.DurationVar(&cfg.Settle, "settle", 10*time.Second, "how long each REST check may take to hold")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target, cfg.NoRESTCheck = t, !*restCheck
			rep, err := bench.Presence(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			return rep, rep.Clean(), nil
		}
	case "channels":
		cfg := bench.ChannelsConfig{}
		fs.IntVar(&cfg.Channels, "channels", 10000, "channels, one subscriber each, spread over the --ws nodes")
		fs.IntVar(&cfg.Requests, "requests", 100, "GET /channels requests to time on --rest, one after another")
		fs.DurationVar(&cfg.Settle, "settle", 10*time.Second, "how long --rest has to list every channel before the timed requests")
		run = func(ctx context.Context) (any, bool, error) {
			cfg.Target = t
			rep, err := bench.Channels(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			return rep, rep.Clean(), nil
		}
	default:
		fmt.Fprintf(stderr, "herald bench: unknown scenario %q (scenarios: idle, fanout, multichannel, ramp, churn, publish, presence, channels)\n", scenario)
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
	var err error
	if t.ServerPIDs, err = bench.ParsePIDs(*pids); err != nil {
		fmt.Fprintf(stderr, "herald bench %s: %v\n", scenario, err)
		return 2
	}
	if t.Procs > 1 {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "herald bench %s: --procs: %v\n", scenario, err)
			return 1
		}
		t.Child = []string{exe, "bench", "child"}
	}
	if err := t.Check(); err != nil { // --ws, --server-pid, --metrics, before any load
		fmt.Fprintf(stderr, "herald bench %s: %v\n", scenario, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if !*asJSON && !*quiet {
		watch.Progress, watch.Width = bench.Terminal(stderr)
	}
	watch.MetricsURL = t.Metrics
	t.MetricsPrefix = watch.MetricsPrefix
	monitor, err := bench.StartMonitor(ctx, watch)
	if err != nil {
		fmt.Fprintf(stderr, "herald bench %s: %v\n", scenario, err)
		return 1
	}
	t.Timeline = monitor.Timeline()
	rep, clean, err := run(ctx)
	monitor.Stop(context.Background())
	var htmlErr error
	if *htmlPath != "" {
		page := monitor.HTMLReport(rep, err)
		page.Command, page.Version = append([]string{"herald", "bench", scenario}, args...), version
		if htmlErr = bench.WriteHTMLFile(*htmlPath, page); htmlErr != nil {
			fmt.Fprintf(stderr, "herald bench %s: %v\n", scenario, htmlErr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "herald bench %s: %v\n", scenario, err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		var doc any = rep
		if s := monitor.Server(); s != nil {
			doc, err = bench.WithServerMetrics(rep, s) // the report's members and "server_metrics"
		}
		if err == nil {
			err = enc.Encode(doc)
		}
	} else {
		err = rep.(interface{ WriteText(io.Writer) error }).WriteText(stdout)
		if s := monitor.Server(); err == nil && s != nil {
			err = s.WriteText(stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "herald bench %s: write report: %v\n", scenario, err)
		return 1
	}
	if !clean {
		fmt.Fprintf(stderr, "herald bench %s: the run was not clean: see failures, lost connections or deliveries above\n", scenario)
		return 1
	}
	if htmlErr != nil {
		return 1
	}
	return 0
}
