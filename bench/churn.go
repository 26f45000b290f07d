package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ChurnConfig configures the churn scenario. The zero value of each field means its default;
// Target.Rate is the rate of connect–subscribe–disconnect cycles, default 1000 per second.
type ChurnConfig struct {
	Target
	Steady       int           // steady subscribers, on one channel; default 1000
	Duration     time.Duration // how long cycles run; default 30s
	PerClient    int           // channels each cycle subscribes to; default 5
	EventRate    float64       // events per second to the steady subscribers; default 10
	PayloadBytes int           // default 100
	Wait         time.Duration // after the last publish, how long to wait for deliveries; default 5s
	// Settle is how long, after every connection closed, the server has to return to its
	// baseline counts; default 30s.
	Settle time.Duration
}

func (c ChurnConfig) withDefaults() ChurnConfig {
	c.Target = c.Target.withDefaults()
	c.Rate = or(c.Rate, 1000)
	c.Steady = or(c.Steady, 1000)
	c.Duration = or(c.Duration, 30*time.Second)
	c.PerClient = or(c.PerClient, 5)
	c.EventRate = or(c.EventRate, 10)
	c.PayloadBytes = or(c.PayloadBytes, 100)
	c.Wait = or(c.Wait, 5*time.Second)
	c.Settle = or(c.Settle, 30*time.Second)
	return c
}

func (c ChurnConfig) check() error {
	errs := []error{c.Target.check()}
	if _, _, err := c.eventsURL(); err != nil {
		errs = append(errs, err)
	}
	if c.Procs > 1 {
		errs = append(errs, errors.New("--procs: churn runs in one process"))
	}
	if c.Steady < 0 || c.PerClient < 0 || c.PerClient > churnChannels || c.EventRate < 0 || c.PayloadBytes < 0 {
		errs = append(errs, errors.New("--steady, --event-rate and --payload must be positive, --per-client between 1 and 100"))
	}
	if c.Duration < 0 || c.Wait < 0 || c.Settle < 0 {
		errs = append(errs, errors.New("--duration, --wait and --settle must not be negative"))
	}
	return errors.Join(errs...)
}

// churnChannels is how many channels cycles spread over, besides the steady one: each cycle
// joins the steady channel and PerClient-1 of them, so channels are created and removed as
// clients come and go while the steady channel's subscriber set changes under its fan-out.
const churnChannels = 100

// ChurnReport is the result of Churn.
type ChurnReport struct {
	Scenario        string       `json:"scenario"` // "churn"
	Server          ServerInfo   `json:"server"`
	Steady          int          `json:"steady"`
	RatePerSec      float64      `json:"rate_per_sec"`
	Seconds         float64      `json:"seconds"`
	PerClient       int          `json:"per_client"`
	EventRate       float64      `json:"event_rate"`
	Setup           Setup        `json:"setup"` // the steady subscribers
	Cycles          Cycles       `json:"cycles"`
	Published       int          `json:"published"`
	PublishFailures int          `json:"publish_failures"`
	Delivery        Delivery     `json:"delivery"` // the steady subscribers'
	Latency         Latency      `json:"latency"`
	Lost            Lost         `json:"lost"` // steady subscribers the server dropped
	ServerState     *ServerState `json:"server_state,omitempty"`
	Generator       Usage        `json:"generator"`
	Timeline        []Point      `json:"timeline,omitempty"`
}

// Churn holds cfg.Steady subscribers on "churn-steady", which receives cfg.EventRate events a
// second, while cycles of connect, subscribe to cfg.PerClient channels and disconnect (every
// other one with a close frame, the others by resetting the socket) start at cfg.Rate per
// second for cfg.Duration. It then closes everything and waits for the server's own counts
// (cfg.Metrics, or /health) to return to what they were before.
func Churn(ctx context.Context, cfg ChurnConfig) (rep *ChurnReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep = &ChurnReport{Scenario: "churn", Server: cfg.info(true), Steady: cfg.Steady, RatePerSec: cfg.Rate,
		Seconds: cfg.Duration.Seconds(), PerClient: cfg.PerClient, EventRate: cfg.EventRate}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	counts, err := newCounter(cfg.Target)
	if err != nil {
		return nil, err
	}
	if before, err := counts.read(ctx); err == nil {
		rep.ServerState = &ServerState{Source: counts.source, Before: before}
	} else {
		rep.ServerState = &ServerState{Source: counts.source, Error: "before the run: " + err.Error()}
	}
	pub, err := newPublisher(cfg.Target, cfg.PayloadBytes, 1)
	if err != nil {
		return nil, err
	}
	defer pub.close()
	gen := self().startCPU()

	names := make([]string, churnChannels+1)
	names[0] = "churn-steady"
	for i := 1; i < len(names); i++ {
		names[i] = "churn-" + strconv.Itoa(i-1)
	}
	every := time.Duration(float64(time.Second) / cfg.EventRate)
	seq := newSequence(1)
	rec := newRecorder(names[:1], int((cfg.Duration+cfg.Timeout)/every)+10, cfg.Timeline)
	steady, err := newPool(rec, cfg.Timeline)
	if err != nil {
		return nil, err
	}
	defer steady.close(cfg.Timeout)
	fast := cfg.Target
	fast.Rate = 0 // the rate is the cycles'; the steady subscribers connect at once
	rep.Setup, err = connect(ctx, fast, steady, 0, cfg.Steady, subSpec{Channels: names[:1]}.chansOf())
	if err != nil {
		return rep, err
	}

	stopPub := make(chan struct{})
	published := make(chan error, 1)
	go func() { published <- publishEvery(ctx, stopPub, pub, names[:1], seq, every) }()
	rep.Cycles, err = runCycles(ctx, cfg, names)
	close(stopPub)
	if perr := <-published; err == nil {
		err = perr
	}
	if err == nil && rep.Cycles.Completed == 0 {
		err = nothingMeasured("none of %d connect–subscribe–disconnect cycles completed in %v (first error: %s)",
			rep.Cycles.Attempted, cfg.Duration, or(rep.Cycles.FirstError, "none"))
	}
	if err != nil {
		return rep, err
	}
	last := seq.last(0)
	rep.Published, rep.PublishFailures = int(last), len(seq.failedOn(0))
	rec.expect(expectedSince(steady, last, seq.failedOn(0)))
	waitStart := time.Now()
	rep.Delivery.Complete = rec.await(ctx, cfg.Wait)
	rep.Delivery.WaitSeconds = time.Since(waitStart).Seconds()
	if u, err := gen.stop(); err == nil {
		rep.Generator = u
	}
	rep.Lost = steady.lostSoFar()
	if err := steady.close(cfg.Timeout); err != nil {
		return rep, err
	}
	complete, wait := rep.Delivery.Complete, rep.Delivery.WaitSeconds
	rep.Delivery = steady.delivery(func(int) int32 { return last }, seq.failedOn)
	rep.Delivery.Complete, rep.Delivery.WaitSeconds = complete, wait
	rep.Latency = rec.tally().Latency.summary()
	if err := checkDelivered(rep.Delivery); err != nil {
		return rep, err
	}

	pub.close() // its keep-alive connections are not the server's to count
	if s := rep.ServerState; s.Error == "" {
		counts.settleBack(ctx, s, cfg.Settle)
	}
	return rep, nil
}

// WriteText writes the report as a readable block.
func (r *ChurnReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "churn: %d steady subscribers at %g events/s while %g cycles/s connect, subscribe to %d channels and disconnect for %gs, %s\n",
		r.Steady, r.EventRate, r.RatePerSec, r.PerClient, r.Seconds, r.Server.on())
	writeSetup(b, r.Setup)
	c := r.Cycles
	fmt.Fprintf(b, "  cycles       %d started, %d completed (%.0f/s), %d failed; %d closed cleanly (%d unanswered), %d reset\n",
		c.Attempted, c.Completed, c.RatePerSec, c.Failed, c.Clean, c.CloseUnanswered, c.Dropped)
	if c.FirstError != "" {
		fmt.Fprintf(b, "               first failure: %s\n", c.FirstError)
	}
	fmt.Fprintf(b, "  published    %d events, %d failed\n", r.Published, r.PublishFailures)
	writeDelivery(b, r.Delivery)
	writeLost(b, r.Lost, "steady subscribers")
	fmt.Fprintf(b, "  latency ms   %8s %7s %7s %7s %7s %7s %7s\n", "count", "min", "p50", "p95", "p99", "p99.9", "max")
	writeLatency(b, "steady", r.Latency, "")
	if s := r.ServerState; s != nil {
		summed := ""
		if strings.Contains(s.Source, ", ") {
			summed = " (summed over the nodes)"
		}
		fmt.Fprintf(b, "  server       %s%s\n", s.Source, summed)
		fmt.Fprintf(b, "    before     %s\n", s.Before)
		if s.After != nil {
			fmt.Fprintf(b, "    after      %s\n", *s.After)
		}
		switch {
		case s.Returned:
			fmt.Fprintf(b, "    verdict    back to baseline after %.1f s\n", s.Seconds)
		case s.Error != "" && s.After == nil:
			fmt.Fprintf(b, "    verdict    unknown: %s\n", s.Error)
		default:
			fmt.Fprintf(b, "    verdict    NOT back to baseline after %.1f s\n", s.Seconds)
		}
	}
	fmt.Fprintf(b, "  generator    CPU %.2f s; RSS %s\n", r.Generator.CPUSeconds, mib(r.Generator.RSSBytes))
	return b.Flush()
}
