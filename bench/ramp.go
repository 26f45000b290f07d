package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// RampConfig configures the ramp scenario. The zero value of each field means its default;
// Target.Rate is the connection rate, default 500 per second.
type RampConfig struct {
	Target
	Conns        int           // connections to reach; default 15000
	Channels     []string      // every client joins all; default BTC.trade ETH.trade SOL.trade ODIN.trade DOGE.trade
	EventEvery   time.Duration // the publisher sends one event to every channel this often; default 1s
	Hold         time.Duration // after the last attempt, how long the run goes on; default 10s
	Every        time.Duration // report interval; default 10s
	PayloadBytes int           // default 100
	Wait         time.Duration // after the last publish, how long to wait for deliveries; default 5s
}

// DefaultRampChannels are the channels of the market-data test ramp reproduces.
var DefaultRampChannels = []string{"BTC.trade", "ETH.trade", "SOL.trade", "ODIN.trade", "DOGE.trade"}

func (c RampConfig) withDefaults() RampConfig {
	c.Target = c.Target.withDefaults()
	c.Rate = or(c.Rate, 500)
	c.Conns = or(c.Conns, 15000)
	if len(c.Channels) == 0 {
		c.Channels = DefaultRampChannels
	}
	c.EventEvery = or(c.EventEvery, time.Second)
	c.Hold = or(c.Hold, 10*time.Second)
	c.Every = or(c.Every, 10*time.Second)
	c.PayloadBytes = or(c.PayloadBytes, 100)
	c.Wait = or(c.Wait, 5*time.Second)
	return c
}

func (c RampConfig) check() error {
	errs := []error{c.Target.check()}
	if _, _, err := c.eventsURL(); err != nil {
		errs = append(errs, err)
	}
	if c.Procs > 1 {
		errs = append(errs, errors.New("--procs: ramp runs in one process"))
	}
	if c.Conns < 0 || c.PayloadBytes < 0 || len(c.Channels) > maxChannelsPerTrigger {
		errs = append(errs, errors.New("--conns and --payload must be positive, and at most 100 channels"))
	}
	if c.EventEvery < 0 || c.Hold < 0 || c.Every < 0 || c.Wait < 0 {
		errs = append(errs, errors.New("--event-every, --hold, --every and --wait must not be negative"))
	}
	return errors.Join(errs...)
}

// RampReport is the result of Ramp.
type RampReport struct {
	Scenario    string     `json:"scenario"` // "ramp"
	Server      ServerInfo `json:"server"`
	Conns       int        `json:"conns"`
	RatePerSec  float64    `json:"rate_per_sec"`
	Channels    []string   `json:"channels"`
	HoldSeconds float64    `json:"hold_seconds"`
	Rows        []RampRow  `json:"rows"`
	Setup       Setup      `json:"setup"`
	// PeakActive is the most connections open at the end of an interval, over the intervals
	// before the first whose success fell under 99%.
	PeakActive int64 `json:"peak_active_at_99"`
	// ServerRSS is the server's memory before the ramp and at its end, per open connection.
	ServerRSS       *ServerRSS `json:"server_rss,omitempty"`
	DeliveredPerSec float64    `json:"delivered_per_sec"` // event frames over the publishing time
	Published       int        `json:"published"`         // events per channel
	PublishFailures int        `json:"publish_failures"`
	Delivery        Delivery   `json:"delivery"`
	// Latency is from each event's send time, stamped just before its request;
	// LatencyFromSchedule from the time the publisher's schedule (one event each --event-every)
	// meant to send it, which a REST API slower than the schedule cannot hide.
	Latency             Latency `json:"latency"`
	LatencyFromSchedule Latency `json:"latency_from_schedule"`
	Lost                Lost    `json:"lost"`
	Generator           Usage   `json:"generator"`
	Timeline            []Point `json:"timeline,omitempty"`
}

// Ramp connects cfg.Conns clients at cfg.Rate per second, each joining every channel of
// cfg.Channels, while a publisher sends one event to every channel each cfg.EventEvery; it
// reports every cfg.Every and goes on cfg.Hold after the last attempt.
func Ramp(ctx context.Context, cfg RampConfig) (rep *RampReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep = &RampReport{Scenario: "ramp", Server: cfg.info(true), Conns: cfg.Conns, RatePerSec: cfg.Rate,
		Channels: cfg.Channels, HoldSeconds: cfg.Hold.Seconds()}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	servers := cfg.serverProcs()
	var base []int64
	if servers.ok() {
		if base, err = servers.rss(); err != nil {
			return nil, err
		}
		rep.ServerRSS = &ServerRSS{}
		rep.ServerRSS.fill(servers, base, make([]int64, len(base)), nil, 0)
	}
	pub, err := newPublisher(cfg.Target, cfg.PayloadBytes, 1)
	if err != nil {
		return nil, err
	}
	defer pub.close()

	seq := newSequence(len(cfg.Channels))
	runFor := time.Duration(float64(cfg.Conns)/cfg.Rate*float64(time.Second)) + cfg.Hold + cfg.Timeout
	rec := newRecorder(cfg.Channels, int(runFor/cfg.EventEvery)+10, cfg.Timeline)
	rec.started = func(ch int) int32 { return seq.last(ch) }
	p, err := newPool(rec, cfg.Timeline)
	if err != nil {
		return nil, err
	}
	defer p.close(cfg.Timeout)
	gen := self().startCPU()

	ctx, cancel := context.WithCancelCause(ctx)
	stopPub := make(chan struct{})
	published := make(chan error, 1)
	go func() { published <- publishEvery(ctx, stopPub, pub, cfg.Channels, seq, cfg.EventEvery) }()
	connected := make(chan error, 1)
	all := subSpec{Channels: cfg.Channels, PerClient: len(cfg.Channels)}.chansOf()
	var setup Setup
	go func() {
		var err error
		setup, err = connect(ctx, cfg.Target, p, 0, cfg.Conns, all)
		connected <- err
	}()
	pubDone, connDone := false, false
	defer func() { // on every path: both goroutines end before the report is read
		cancel(errors.New("run over"))
		if !pubDone {
			<-published
		}
		if !connDone {
			<-connected
		}
		rep.Setup = setup
	}()

	start := time.Now()
	framesAt := rec.frames.Load()
	rows := newRampSampler(p, rec, servers.meter(), start)
	var connectErr error
	hold := make(<-chan time.Time) // set when the last attempt has completed
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
run:
	for {
		select {
		case <-tick.C:
			rep.Rows = append(rep.Rows, rows.sample())
		case connectErr = <-connected:
			connDone = true
			if connectErr != nil && p.established.Load() == 0 {
				return rep, connectErr
			}
			hold = time.After(cfg.Hold)
		case <-hold:
			break run
		case err := <-published:
			pubDone = true
			if err == nil {
				err = errors.New("publisher stopped")
			}
			return rep, err
		case <-ctx.Done():
			return rep, context.Cause(ctx)
		}
	}
	rep.Rows = append(rep.Rows, rows.sample())
	if servers.ok() {
		if after, err := servers.rss(); err == nil {
			var perNode []int
			if servers.perNode() {
				perNode = p.activeOn(len(servers.pids))
			}
			rep.ServerRSS.fill(servers, base, after, perNode, int(p.active.Load()))
		}
	}
	close(stopPub)
	pubDone = true
	if err := <-published; err != nil {
		return rep, err
	}
	rep.DeliveredPerSec = float64(rec.frames.Load()-framesAt) / time.Since(start).Seconds()
	rep.PeakActive = peakAt99(rep.Rows)

	// Every open subscription expects each event published after it succeeded.
	last := seq.last(0)
	rep.Published, rep.PublishFailures = int(last), len(seq.failedOn(0))
	rec.expect(expectedSince(p, last, seq.failedOn(0)))
	waitStart := time.Now()
	rep.Delivery.Complete = rec.await(context.Background(), cfg.Wait)
	rep.Delivery.WaitSeconds = time.Since(waitStart).Seconds()
	if u, err := gen.stop(); err == nil {
		rep.Generator = u
	}
	rep.Lost = p.lostSoFar()
	if err := p.close(cfg.Timeout); err != nil {
		return rep, err
	}
	complete, wait := rep.Delivery.Complete, rep.Delivery.WaitSeconds
	rep.Delivery = p.delivery(func(int) int32 { return last }, seq.failedOn)
	rep.Delivery.Complete, rep.Delivery.WaitSeconds = complete, wait
	t := rec.tally()
	rep.Latency, rep.LatencyFromSchedule = t.Latency.summary(), t.FromSchedule.summary()
	if connectErr != nil {
		return rep, connectErr
	}
	return rep, checkDelivered(rep.Delivery)
}

// WriteText writes the report as a readable block.
func (r *RampReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "ramp: %d connections at %g/s, each on %s, one event per second per channel, %s\n",
		r.Conns, r.RatePerSec, strings.Join(r.Channels, " "), r.Server.on())
	fmt.Fprintf(b, "  %6s %9s %9s %9s %9s %11s %11s %12s\n", "t (s)", "attempts", "active", "failed", "success", "server CPU", "server RSS", "delivered/s")
	if len(r.Server.PIDs) > 1 {
		fmt.Fprintf(b, "  (server CPU and RSS summed over the %d nodes' processes)\n", len(r.Server.PIDs))
	}
	for _, row := range r.Rows {
		fmt.Fprintf(b, "  %6.0f %9d %9d %9d %8.1f%% %10.0f%% %11s %12.0f\n", row.Second, row.Attempts, row.Active, row.Failed,
			row.SuccessPercent, row.ServerCPU, mib(row.ServerRSSBytes), row.DeliveredPerSec)
	}
	writeSetup(b, r.Setup)
	fmt.Fprintf(b, "  peak         %d active while every interval had at least 99%% success\n", r.PeakActive)
	if s := r.ServerRSS; s != nil {
		fmt.Fprintf(b, "  server RSS   baseline %s, at the end %s: %.0f B = %.2f KiB per open connection%s\n",
			mib(s.BaselineBytes), mib(s.AfterBytes), s.PerConnBytes, s.PerConnKiB, totalNote(len(s.Nodes)))
		writeNodesRSS(b, s.Nodes)
	}
	fmt.Fprintf(b, "  published    %d events per channel, %d failed\n", r.Published, r.PublishFailures)
	fmt.Fprintf(b, "  throughput   %.0f event frames received per second over the run\n", r.DeliveredPerSec)
	writeDelivery(b, r.Delivery)
	writeLost(b, r.Lost, "connections")
	fmt.Fprintf(b, "  latency ms   %8s %7s %7s %7s %7s %7s %7s\n", "count", "min", "p50", "p95", "p99", "p99.9", "max")
	writeLatency(b, "from send", r.Latency, "")
	writeLatency(b, "from sched.", r.LatencyFromSchedule, "")
	fmt.Fprintf(b, "  generator    CPU %.2f s over the run; RSS %s\n", r.Generator.CPUSeconds, mib(r.Generator.RSSBytes))
	return b.Flush()
}
