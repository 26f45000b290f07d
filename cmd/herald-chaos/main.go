//go:build linux

// Command herald-chaos runs herald's fault-injection harness (package chaos): herald nodes
// on one of three setups, publishers and subscribers, faults on a schedule drawn from a seed,
// and a check of what every subscriber received. It prints the seed first, a report at the
// end, and exits 1 when an acknowledged event was lost, delivered twice or out of order (2
// when the run could not be set up). docs/chaos.md is its manual.
//
//	herald-chaos --setup nats --duration 5m [--seed N] [--kafka] [--out report.json]
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/herald-rt/herald/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, out, recheck, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "herald-chaos: %v\n", err)
		return 2
	}
	if recheck != "" {
		rep, err := chaos.CheckDir(recheck)
		if err != nil {
			fmt.Fprintf(stderr, "herald-chaos: %v\n", err)
			return 2
		}
		rep.Print(stdout)
		if rep.Failed() {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "herald-chaos: seed %d (run it again with --seed %d)\n", o.Seed, o.Seed)
	if o.Kafka {
		if _, err := exec.LookPath("java"); err != nil {
			fmt.Fprintln(stdout, "herald-chaos: --kafka: java is not installed, so no Kafka broker: running without Kafka (apt-get install -y openjdk-17-jre-headless maven)")
			o.Kafka = false
		}
	}
	if o.Herald == "" {
		dir, err := os.MkdirTemp("", "herald-chaos-bin-")
		if err != nil {
			fmt.Fprintf(stderr, "herald-chaos: %v\n", err)
			return 2
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(stdout, "herald-chaos: building cmd/herald (--herald to give a binary)")
		if o.Herald, err = chaos.BuildHerald(ctx, dir); err != nil {
			fmt.Fprintf(stderr, "herald-chaos: %v\n", err)
			return 2
		}
	}
	rep, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "herald-chaos: %v (seed %d)\n", err, o.Seed)
		return 2
	}
	rep.Print(stdout)
	if out != "" {
		if err := rep.WriteJSON(out); err != nil {
			fmt.Fprintf(stderr, "herald-chaos: writing the report: %v\n", err)
			return 2
		}
	}
	if rep.Failed() {
		return 1
	}
	return 0
}

// parse reads the flags into the run's options and the report file's path.
func parse(args []string, stderr io.Writer) (o chaos.Options, out, recheck string, err error) {
	d := chaos.DefaultOptions
	fs := flag.NewFlagSet("herald-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var setup string
	var verbose bool
	var seed uint64
	spans := map[string]*chaos.Span{"fault-every": &o.FaultEvery, "pause": &o.Pause, "partition": &o.Partition, "down": &o.Down}
	fs.StringVar(&setup, "setup", string(d.Setup), "what the nodes run on: single (one node), redis (nodes over one redis-server) or nats (nodes over three nats-servers with JetStream)")
	fs.DurationVar(&o.Duration, "duration", d.Duration, "how long the publishers publish and the faults go on")
	fs.Uint64Var(&seed, "seed", 0, "the seed of the faults' schedule and every random choice (default: a random one, printed)")
	for name, help := range map[string]string{
		"fault-every": "min,max: the time between two faults",
		"pause":       "min,max: how long a paused node stays stopped (SIGSTOP)",
		"partition":   "min,max: how long a partitioned link stays down",
		"down":        "min,max: how long a killed node or bus server stays down before it is started again",
	} {
		def := map[string]chaos.Span{"fault-every": d.FaultEvery, "pause": d.Pause, "partition": d.Partition, "down": d.Down}[name]
		*spans[name] = def
		fs.Func(name, help+" (default "+def.String()+")", func(s string) error {
			v, err := chaos.ParseSpan(s)
			*spans[name] = v
			return err
		})
	}
	fs.IntVar(&o.Nodes, "nodes", d.Nodes, "herald nodes of a cluster (a single setup has one)")
	fs.IntVar(&o.Channels, "channels", d.Channels, "channels the REST publishers publish to")
	fs.IntVar(&o.Publishers, "publishers", d.Publishers, "REST publishers; each owns every publishers-th channel")
	fs.IntVar(&o.Subscribers, "subscribers", d.Subscribers, "subscribers, each subscribed to every channel")
	fs.Float64Var(&o.Rate, "rate", d.Rate, "events a second each publisher publishes at most")
	fs.BoolVar(&o.Kafka, "kafka", false, "also write numbered records to a Kafka topic that every node ingests (needs java; Kafka's jars are fetched with Maven once)")
	fs.IntVar(&o.KafkaChannels, "kafka-channels", d.KafkaChannels, "with --kafka: the channels (and partitions) of the Kafka records")
	fs.DurationVar(&o.PublishTimeout, "publish-timeout", d.PublishTimeout, "how long one REST publish attempt may take before it is retried")
	fs.DurationVar(&o.Catchup, "catchup", d.Catchup, "once the faults are over: how long the publishers may take to finish and the subscribers to catch up")
	fs.StringVar(&o.RedisAOF, "redis-aof", d.RedisAOF, "redis-server persistence: always (appendfsync always), everysec, or off (no persistence)")
	fs.BoolVar(&o.PowerCut, "power-cut", false, "add the power-cut fault (redis, nats): the bus servers' data directories on lazy file systems (needs FUSE and root); a cut kills every bus server and takes back what they had not fsynced")
	fs.StringVar(&o.NATSSync, "nats-sync", "", "JetStream's sync_interval on every nats-server: always, or a duration (default: the server's, 2m)")
	fs.Func("faults", "the only kinds of fault to inject, comma-separated (default: every kind the setup allows)", func(s string) error {
		o.Faults = nil
		for _, f := range strings.Split(s, ",") {
			o.Faults = append(o.Faults, chaos.Fault(strings.TrimSpace(f)))
		}
		return nil
	})
	fs.StringVar(&o.Herald, "herald", "", "the herald binary (default: go build ./cmd/herald, from inside herald's module)")
	fs.StringVar(&o.RedisServer, "redis-server", "", "the redis-server binary (default: found on PATH)")
	fs.StringVar(&o.NATSServer, "nats-server", "", "the nats-server binary (default: found on PATH)")
	fs.BoolVar(&o.Loopback, "loopback", false, "run everything on 127.0.0.1, without network namespaces (and so without partitions)")
	fs.StringVar(&o.Dir, "dir", "", "keep the run's configuration, logs and stores here (default: a temporary directory, kept only when the run fails)")
	fs.StringVar(&out, "out", "", "write the report as JSON to this file")
	fs.StringVar(&recheck, "check", "", "run nothing: check again the logs a run kept in this directory (--dir, or a failed run's)")
	fs.BoolVar(&verbose, "v", false, "log the run's progress (each fault) to stderr")
	if err := fs.Parse(args); err != nil {
		return o, "", "", err
	}
	if fs.NArg() > 0 {
		return o, "", "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.Setup = chaos.Setup(setup)
	o.Seed = seed
	seeded := false
	fs.Visit(func(f *flag.Flag) { seeded = seeded || f.Name == "seed" })
	if !seeded {
		var b [8]byte
		_, _ = crand.Read(b[:])
		o.Seed = binary.LittleEndian.Uint64(b[:]) >> 11 // fits a JSON number exactly
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return o, out, recheck, nil
}
