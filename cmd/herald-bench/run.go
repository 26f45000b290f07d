package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/herald-rt/herald/bench"
)

// run runs the scenario under a monitor (the timeline, the live progress line, the server's
// metrics) until it ends or SIGINT or SIGTERM, then writes its reports; it returns the exit
// status.
func (j *benchJob) run(stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	monitor, err := j.startMonitor(ctx, stderr)
	if err != nil {
		j.fail(stderr, err)
		return 1
	}
	j.target.Timeline = monitor.Timeline()
	rep, clean, err := j.scenarioRun(ctx, j.target)
	monitor.Stop(context.Background())
	htmlErr := j.writeHTML(monitor, rep, err)
	if htmlErr != nil {
		j.fail(stderr, htmlErr)
	}
	if err != nil {
		j.fail(stderr, err)
		return 1
	}
	if err := j.writeReport(stdout, rep, monitor.Server()); err != nil {
		j.fail(stderr, fmt.Errorf("write report: %w", err))
		return 1
	}
	if !clean {
		j.fail(stderr, errors.New("the run was not clean: see failures, lost connections or deliveries above"))
		return 1
	}
	if htmlErr != nil {
		return 1
	}
	return 0
}

// startMonitor starts watching the run: the progress line on stderr when it is a terminal
// (unless --json or --quiet), and the server's metrics with --metrics.
func (j *benchJob) startMonitor(ctx context.Context, stderr io.Writer) (*bench.Monitor, error) {
	if !j.asJSON && !j.quiet {
		j.watch.Progress, j.watch.Width = bench.Terminal(stderr)
	}
	j.watch.MetricsURL = j.target.Metrics
	j.target.MetricsPrefix = j.watch.MetricsPrefix
	return bench.StartMonitor(ctx, j.watch)
}

// fail says on stderr why the run failed.
func (j *benchJob) fail(stderr io.Writer, err error) {
	fmt.Fprintf(stderr, "herald-bench %s: %v\n", j.scenario, err)
}
