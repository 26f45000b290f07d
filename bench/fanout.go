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
	// Idle, when set, is a quiet window between subscribing and the first publish: the
	// server's RSS per connection and the kernel's memory per socket are measured once it
	// settles, then the nodes' CPU over Idle while the clients only ping (pusher-js's activity
	// check, Target.ActivityTimeout). IdleFast, when set, is a second window after it with
	// the clients' own activity timeout at IdleFastActivity (default 10s).
	Idle, IdleFast, IdleFastActivity time.Duration
	// Reconnect brings back the subscribers the server closes, as pusher-js does, each
	// recovering from its position when the channel keeps history (ReconnectCounts).
	Reconnect bool
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
	if c.IdleFastActivity == 0 {
		c.IdleFastActivity = 10 * time.Second
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
	if c.Idle < 0 || c.IdleFast < 0 || c.IdleFastActivity < 0 {
		errs = append(errs, errors.New("--idle, --idle-fast and --idle-fast-activity must not be negative"))
	}
	if c.IdleFast > 0 && c.Idle == 0 {
		errs = append(errs, errors.New("--idle-fast: needs --idle"))
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
	// Reconnect is how the dropped subscribers came back; nil without FanoutConfig.Reconnect.
	Reconnect *ReconnectCounts `json:"reconnect,omitempty"`
	// Idle is the quiet phase before the first publish (FanoutConfig.Idle); nil without it.
	Idle *IdlePhase `json:"idle,omitempty"`
	// ServerUsage and Generator are CPU time from just before the first publish to the end of
	// delivery (every expected delivery in, or Wait passed). ServerUsage is nil without a pid.
	ServerUsage *Usage  `json:"server_usage,omitempty"`
	Generator   Usage   `json:"generator"`
	Timeline    []Point `json:"timeline,omitempty"`
}

// Clean reports whether every subscriber got every event once, in order, and none was lost for
// good: with FanoutConfig.Reconnect, a first connection that failed and subscribed on a later
// try, and subscribers the server closed that all came back, are not failures (a subscriber
// that came back without the events it missed still counts them missing).
func (r *FanoutReport) Clean() bool {
	failed, lost := r.Setup.Failed, r.Lost.Count
	if c := r.Reconnect; c != nil {
		failed -= c.SetupLater
		if c.Closed == lost && c.Reconnected == c.Closed {
			lost = 0
		}
	}
	d := r.Delivery
	return failed == 0 && lost == 0 && d.Missing == 0 && d.Duplicated == 0 && d.OutOfOrder == 0 && d.Unexpected == 0
}

// Fanout subscribes cfg.Subs clients to cfg.Channel, then publishes cfg.Events events
// cfg.Interval apart through the REST API and measures every delivery.
func Fanout(ctx context.Context, cfg FanoutConfig) (rep *FanoutReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep = &FanoutReport{Scenario: "fanout", Server: cfg.info(true), Subs: cfg.Subs, Events: cfg.Events,
		IntervalSeconds: cfg.Interval.Seconds(), PayloadBytes: cfg.PayloadBytes, Channel: cfg.Channel,
		PerEvent: make([]EventReport, cfg.Events)}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	pub, err := newPublisher(cfg.Target, cfg.PayloadBytes, 1)
	if err != nil {
		return nil, err
	}
	defer pub.close()

	spec := subSpec{Conns: cfg.Subs, Channels: []string{cfg.Channel}, Events: cfg.Events, BucketSize: 1, Reconnect: cfg.Reconnect}
	var quiet func(context.Context, subscribers) error
	if cfg.Idle > 0 {
		var base []int64
		if s := cfg.serverProcs(); s.ok() {
			if base, err = s.rss(); err != nil {
				return rep, err
			}
		}
		k0, kok := readKernel()
		windows := []idleSpec{{d: cfg.Idle}}
		if cfg.IdleFast > 0 {
			windows = append(windows, idleSpec{d: cfg.IdleFast, activity: cfg.IdleFastActivity})
		}
		quiet = func(ctx context.Context, g subscribers) error {
			var err error
			rep.Idle, err = idlePhase(ctx, cfg.Target, g, base, k0, kok, windows)
			return err
		}
	}
	r, err := runPublished(ctx, cfg.Target, spec, cfg.Wait, quiet, func(ctx context.Context) error {
		start := time.Now()
		for k := 1; k <= cfg.Events; k++ {
			if err := sleepUntil(ctx, start.Add(time.Duration(k-1)*cfg.Interval)); err != nil {
				return err
			}
			took, err := pub.trigger(ctx, []string{cfg.Channel}, k)
			if err != nil {
				return err
			}
			rep.PerEvent[k-1] = EventReport{Seq: k, PublishMs: float64(took.Microseconds()) / 1000}
		}
		return nil
	})
	rep.Setup = r.Setup
	if err != nil {
		return rep, err
	}
	t := r.Tally
	rep.Lost, rep.Reconnect, rep.Delivery, rep.ServerUsage, rep.Generator = t.Lost, t.Reconnect, t.Delivery, r.Server, r.Generator
	rep.Latency = t.Latency.summary()
	for i := range rep.PerEvent {
		rep.PerEvent[i].Seq = i + 1
		if i < len(t.Buckets) {
			rep.PerEvent[i].Latency = t.Buckets[i].summary()
		}
	}
	return rep, checkDelivered(rep.Delivery)
}
