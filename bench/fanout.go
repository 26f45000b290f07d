package bench

import (
	"context"
	"errors"
	"time"
)

// FanoutConfig configures the fanout scenario. The zero value of each field means its default.
type FanoutConfig struct {
	Target
	Subs         int           // subscribers on the channel; default 1000
	Events       int           // events published; default 5
	Interval     time.Duration // between publishes; default 3s
	PayloadBytes int           // size of each event's data; default 100
	Channel      string        // default "fanout"
	// Wait is how long, after the last publish, the run waits for every delivery; default 5s.
	Wait time.Duration
}

func (c FanoutConfig) withDefaults() FanoutConfig {
	c.Target = c.Target.withDefaults()
	if c.Subs == 0 {
		c.Subs = 1000
	}
	if c.Events == 0 {
		c.Events = 5
	}
	if c.Interval == 0 {
		c.Interval = 3 * time.Second
	}
	if c.PayloadBytes == 0 {
		c.PayloadBytes = 100
	}
	if c.Channel == "" {
		c.Channel = "fanout"
	}
	if c.Wait == 0 {
		c.Wait = 5 * time.Second
	}
	return c
}

func (c FanoutConfig) check() error {
	var errs []error
	if err := c.Target.check(); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := c.eventsURL(); err != nil {
		errs = append(errs, err)
	}
	if c.Subs < 0 {
		errs = append(errs, errors.New("--subs must be positive"))
	}
	if c.Events < 0 || c.Events > 1<<20 {
		errs = append(errs, errors.New("--events must be between 1 and 1048576"))
	}
	if c.Interval < 0 || c.Wait < 0 {
		errs = append(errs, errors.New("--interval and --wait must not be negative"))
	}
	if c.PayloadBytes < 0 {
		errs = append(errs, errors.New("--payload must not be negative"))
	}
	return errors.Join(errs...)
}

// EventReport is one published event: how long the REST call took and its latencies.
type EventReport struct {
	Seq       int     `json:"seq"`
	PublishMs float64 `json:"publish_ms"`
	Latency   Latency `json:"latency"`
}

// FanoutReport is the result of Fanout.
type FanoutReport struct {
	Scenario        string        `json:"scenario"` // "fanout"
	Server          ServerInfo    `json:"server"`
	Subs            int           `json:"subs"`
	Events          int           `json:"events"`
	IntervalSeconds float64       `json:"interval_seconds"`
	PayloadBytes    int           `json:"payload_bytes"`
	Channel         string        `json:"channel"`
	Setup           Setup         `json:"setup"`
	Delivery        Delivery      `json:"delivery"`
	Latency         Latency       `json:"latency"` // every first receipt of every event
	PerEvent        []EventReport `json:"per_event"`
	Lost            Lost          `json:"lost"` // subscribers the server dropped during the run
	// ServerUsage and Generator are CPU time from just before the first publish to the end of
	// delivery (every expected delivery in, or Wait passed). ServerUsage is nil without a pid.
	ServerUsage *Usage `json:"server_usage,omitempty"`
	Generator   Usage  `json:"generator"`
}

// Fanout subscribes cfg.Subs clients to cfg.Channel, then publishes cfg.Events events
// cfg.Interval apart through the REST API and measures every delivery.
func Fanout(ctx context.Context, cfg FanoutConfig) (*FanoutReport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep := &FanoutReport{Scenario: "fanout", Server: cfg.info(true), Subs: cfg.Subs, Events: cfg.Events,
		IntervalSeconds: cfg.Interval.Seconds(), PayloadBytes: cfg.PayloadBytes, Channel: cfg.Channel,
		PerEvent: make([]EventReport, cfg.Events)}
	pub, err := newPublisher(cfg.Target, cfg.Channel, cfg.PayloadBytes)
	if err != nil {
		return nil, err
	}
	defer pub.close()

	rec := newRecorder(cfg.Events)
	p, setup, err := connect(ctx, cfg.Target, cfg.Subs, func(int) string { return cfg.Channel }, rec)
	rep.Setup = setup
	if err != nil {
		return rep, err
	}
	defer p.close(cfg.Timeout)
	rec.expect(int64(len(p.clients)) * int64(cfg.Events))

	var serverCPU *cpuWindow
	if cfg.ServerPID > 0 {
		serverCPU = procOf(cfg.ServerPID).startCPU()
	}
	genCPU := self().startCPU()
	start := time.Now()
	for k := 1; k <= cfg.Events; k++ {
		if d := time.Until(start.Add(time.Duration(k-1) * cfg.Interval)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return rep, context.Cause(ctx)
			}
		}
		took, err := pub.publish(ctx, k)
		if err != nil {
			return rep, err
		}
		rep.PerEvent[k-1] = EventReport{Seq: k, PublishMs: float64(took.Microseconds()) / 1000}
	}
	last := time.Now()
	wait := time.NewTimer(cfg.Wait)
	select {
	case <-rec.all:
		rep.Delivery.Complete = true
	case <-wait.C:
	case <-ctx.Done():
		wait.Stop()
		return rep, context.Cause(ctx)
	}
	wait.Stop()
	rep.Delivery.WaitSeconds = time.Since(last).Seconds()
	if serverCPU != nil {
		u, err := serverCPU.stop()
		if err != nil {
			return rep, err
		}
		rep.ServerUsage = &u
	}
	if u, err := genCPU.stop(); err == nil {
		rep.Generator = u
	}

	if err := p.close(cfg.Timeout); err != nil {
		return rep, err
	}
	rep.Lost = lostOf(p)
	rep.tally(p)
	return rep, nil
}

// tally counts deliveries and builds the latency histograms; p must be closed.
func (r *FanoutReport) tally(p *pool) {
	overall := newHistogram()
	per := make([]histogram, r.Events)
	for i := range per {
		per[i] = newHistogram()
	}
	seen := make([]bool, r.Events+1)
	for _, c := range p.clients {
		r.Delivery.count(c.samples, r.Events, seen, func(s sample) {
			overall.record(s.lat)
			per[s.seq-1].record(s.lat)
		})
	}
	r.Delivery.finish()
	r.Latency = overall.summary()
	for i := range per {
		r.PerEvent[i].Seq = i + 1
		r.PerEvent[i].Latency = per[i].summary()
	}
	if d := float64(r.Delivery.Delivered); d > 0 {
		if r.ServerUsage != nil {
			r.ServerUsage.CPUPerDeliveryMicros = r.ServerUsage.CPUSeconds * 1e6 / d
		}
		r.Generator.CPUPerDeliveryMicros = r.Generator.CPUSeconds * 1e6 / d
	}
}
