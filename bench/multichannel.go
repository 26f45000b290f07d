package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MultichannelConfig configures the multichannel scenario. The zero value of each field means
// its default.
type MultichannelConfig struct {
	Target
	Subs         int           // subscribers in all, client i on channel i mod Channels; default 19000
	Channels     int           // default 40
	Burst        int           // events published to every channel per round; default 10
	Rounds       int           // default 5
	Interval     time.Duration // between the starts of rounds; default 1s
	PayloadBytes int           // default 100
	// Wait is how long, after the last publish, the run waits for every delivery; default 10s.
	Wait time.Duration
	// Batch publishes each channel's burst as one batch_events request (Burst at most 10)
	// instead of one request per event naming every channel.
	Batch bool
	// Publishers, with Batch, is how many requests are in flight at once, each channel's
	// bursts always from one of them (in order); default 1.
	Publishers int
	// PerChannel publishes with one publisher per channel, all running at once: each round,
	// each sends its channel's burst as Burst single-event requests, each after the previous
	// one's answer (see publishPerChannel). It excludes Batch.
	PerChannel bool
	// Spread, with PerChannel and several WS nodes, sends channel c's publishes to node
	// c mod N (its HTTP URL, as restNodes derives it) instead of to REST.
	Spread bool
}

// maxPerChannel bounds Channels with PerChannel: a publisher and its connection each.
const maxPerChannel = 256

func (c MultichannelConfig) withDefaults() MultichannelConfig {
	c.Target = c.Target.withDefaults()
	c.Subs = or(c.Subs, 19000)
	c.Channels = or(c.Channels, 40)
	c.Burst = or(c.Burst, 10)
	c.Rounds = or(c.Rounds, 5)
	c.Interval = or(c.Interval, time.Second)
	c.PayloadBytes = or(c.PayloadBytes, 100)
	c.Wait = or(c.Wait, 10*time.Second)
	c.Publishers = or(c.Publishers, 1)
	return c
}

func (c MultichannelConfig) check() error {
	errs := []error{c.Target.check()}
	if _, _, err := c.eventsURL(); err != nil {
		errs = append(errs, err)
	}
	if c.Subs < 0 || c.Channels < 0 || c.Burst < 0 || c.Rounds < 0 || c.PayloadBytes < 0 {
		errs = append(errs, errors.New("--subs, --channels, --burst, --rounds and --payload must be positive"))
	}
	if c.Publishers < 1 || c.Publishers > 256 || c.Publishers > 1 && !c.Batch {
		errs = append(errs, errors.New("--publishers must be from 1 to 256, and more than 1 only with --batch (--publish-per-channel runs one publisher per channel)"))
	}
	if c.PerChannel && c.Batch {
		errs = append(errs, errors.New("--publish-per-channel and --batch exclude each other: one publish pattern a run"))
	}
	if c.PerChannel && c.Channels > maxPerChannel {
		errs = append(errs, fmt.Errorf("--publish-per-channel: --channels must be at most %d (a publisher and its connection each)", maxPerChannel))
	}
	if c.Spread && !c.PerChannel {
		errs = append(errs, errors.New("--spread-publishes needs --publish-per-channel"))
	}
	if c.Spread && c.Publish != "" {
		errs = append(errs, errors.New("--spread-publishes: with --publish the events go to the log, not to the nodes"))
	}
	if c.Batch && c.Burst > maxBatch {
		errs = append(errs, errors.New("--batch: --burst must be at most 10, the events of one batch_events request"))
	}
	if c.Burst*c.Rounds > 1<<20 {
		errs = append(errs, errors.New("--burst × --rounds must be at most 1048576"))
	}
	if c.Interval < 0 || c.Wait < 0 {
		errs = append(errs, errors.New("--interval and --wait must not be negative"))
	}
	return errors.Join(errs...)
}

// RoundReport is one round: how long its burst took to publish and to deliver, and its
// latencies.
type RoundReport struct {
	Round int `json:"round"`
	// PublishMs is from the round's first publish request to its last answer: the burst's
	// requests, one after the other, or with several publishers all of theirs.
	PublishMs float64 `json:"publish_ms"`
	// StartLagMs is how late the round's first publish began after its scheduled start: a
	// burst that outlasts --interval delays the next round.
	StartLagMs float64 `json:"start_lag_ms"`
	// CompletionMs is the time from the round's first publish to its last delivery (0 when
	// nothing of it was delivered).
	CompletionMs float64 `json:"completion_ms"`
	// Latency is from each event's send time, stamped just before its request;
	// LatencyFromSchedule from the round's scheduled start, which a server slow to answer
	// the publisher cannot hide (see MultichannelReport).
	Latency             Latency `json:"latency"`
	LatencyFromSchedule Latency `json:"latency_from_schedule"`
}

// MultichannelReport is the result of Multichannel.
type MultichannelReport struct {
	Scenario        string     `json:"scenario"` // "multichannel"
	Server          ServerInfo `json:"server"`
	Subs            int        `json:"subs"`
	Channels        int        `json:"channels"`
	Burst           int        `json:"burst"`
	Rounds          int        `json:"rounds"`
	IntervalSeconds float64    `json:"interval_seconds"`
	PayloadBytes    int        `json:"payload_bytes"`
	// Publish is the publish pattern: "all-channels" (each event one request naming every
	// channel), "batch" (each channel's burst one batch_events request) or "per-channel" (one
	// publisher per channel, each burst as single-event requests one after another).
	Publish    string `json:"publish"`
	Publishers int    `json:"publishers"` // publishers running at once
	// PublishLatency is each publish request's time, from just before it is sent to its
	// answer read.
	PublishLatency Latency  `json:"publish_latency"`
	Setup          Setup    `json:"setup"`
	Delivery       Delivery `json:"delivery"`
	// Latency is publish → receive from each event's send time, stamped just before its
	// request. A server slow to answer the REST API throttles the publisher, so later events
	// are stamped late and its queueing never shows there (coordinated omission);
	// LatencyFromSchedule measures from the round's scheduled start (start + (round−1) ×
	// interval), the time every event of the burst was meant to go, and shows it.
	Latency             Latency       `json:"latency"`
	LatencyFromSchedule Latency       `json:"latency_from_schedule"`
	PerRound            []RoundReport `json:"per_round"`
	// DeliveriesPerSec is Delivered over the time from the first publish to the last delivery.
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`
	Lost             Lost    `json:"lost"`
	// SlowConsumers counts connections the server closed with 4100 (over capacity or, in
	// herald, over its outbound buffer).
	SlowConsumers int     `json:"slow_consumers"`
	ServerUsage   *Usage  `json:"server_usage,omitempty"`
	Generator     Usage   `json:"generator"`
	Timeline      []Point `json:"timeline,omitempty"`
}

// Multichannel spreads cfg.Subs subscribers over cfg.Channels channels ("multi-0", ...),
// then, cfg.Rounds times cfg.Interval apart, publishes a burst of cfg.Burst events to every
// channel: by default each event is one request naming every channel (100 per request at
// most), the burst's requests one after the other; with cfg.Batch each channel's burst is one
// batch_events request; with cfg.PerChannel one publisher per channel sends its channel's
// burst one event a request.
func Multichannel(ctx context.Context, cfg MultichannelConfig) (rep *MultichannelReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep = &MultichannelReport{Scenario: "multichannel", Server: cfg.info(true), Subs: cfg.Subs, Channels: cfg.Channels,
		Burst: cfg.Burst, Rounds: cfg.Rounds, IntervalSeconds: cfg.Interval.Seconds(), PayloadBytes: cfg.PayloadBytes,
		Publish: cfg.pattern(), Publishers: cfg.publishers(), PerRound: make([]RoundReport, cfg.Rounds)}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	names := make([]string, cfg.Channels)
	for i := range names {
		names[i] = "multi-" + strconv.Itoa(i)
	}
	pubs, rest, err := cfg.newPublishers()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range pubs {
			p.close()
		}
	}()
	rep.Server.REST = rest

	spec := subSpec{Conns: cfg.Subs, Channels: names, Events: cfg.Burst * cfg.Rounds, BucketSize: cfg.Burst}
	firstPublish := make([]time.Time, cfg.Rounds)
	requests := newHistogram()
	r, err := runPublished(ctx, cfg.Target, spec, cfg.Wait, nil, func(ctx context.Context) error {
		start := time.Now()
		if cfg.PerChannel {
			times, err := publishPerChannel(ctx, pubs, names, cfg.Burst, cfg.Rounds, start, cfg.Interval, requests)
			for round, rt := range times {
				firstPublish[round] = rt.began
				if !rt.began.IsZero() {
					rep.PerRound[round].StartLagMs = ms(rt.began.Sub(rt.sched))
				}
				if !rt.began.IsZero() && rt.ended.After(rt.began) {
					rep.PerRound[round].PublishMs = ms(rt.ended.Sub(rt.began))
				}
			}
			return err
		}
		pub := pubs[0]
		for round := range cfg.Rounds {
			sched := start.Add(time.Duration(round) * cfg.Interval)
			if err := sleepUntil(ctx, sched); err != nil {
				return err
			}
			began := time.Now()
			firstPublish[round] = began
			rep.PerRound[round].StartLagMs = ms(began.Sub(sched))
			if cfg.Batch {
				if err := publishBursts(ctx, pub, cfg.Publishers, names, round*cfg.Burst, cfg.Burst, sched, requests); err != nil {
					return err
				}
			}
			for k := 1; k <= cfg.Burst && !cfg.Batch; k++ {
				if err := publishToAll(ctx, pub, names, round*cfg.Burst+k, sched, requests); err != nil {
					return err
				}
			}
			rep.PerRound[round].PublishMs = ms(time.Since(began))
		}
		return nil
	})
	rep.Setup = r.Setup
	rep.PublishLatency = requests.summary()
	if err != nil {
		return rep, err
	}
	t := r.Tally
	rep.Lost, rep.Delivery, rep.ServerUsage, rep.Generator = t.Lost, t.Delivery, r.Server, r.Generator
	rep.SlowConsumers = t.Lost.ByCode[4100]
	rep.Latency, rep.LatencyFromSchedule = t.Latency.summary(), t.FromSchedule.summary()
	for i := range rep.PerRound {
		rr := &rep.PerRound[i]
		rr.Round = i + 1
		if i < len(t.Buckets) {
			rr.Latency, rr.LatencyFromSchedule = t.Buckets[i].summary(), t.BucketsSched[i].summary()
		}
		if i < len(t.BucketLastNs) && t.BucketLastNs[i] > 0 && !firstPublish[i].IsZero() {
			rr.CompletionMs = ms(time.Duration(t.BucketLastNs[i] - firstPublish[i].UnixNano()))
		}
	}
	if span := float64(t.LastNs-r.Start.UnixNano()) / 1e9; span > 0 {
		rep.DeliveriesPerSec = float64(rep.Delivery.Delivered) / span
	}
	return rep, checkDelivered(rep.Delivery)
}

// pattern names the publish pattern, as MultichannelReport.Publish does.
func (c MultichannelConfig) pattern() string {
	switch {
	case c.PerChannel:
		return "per-channel"
	case c.Batch:
		return "batch"
	}
	return "all-channels"
}

// publishers is how many publishers run at once.
func (c MultichannelConfig) publishers() int {
	if c.PerChannel {
		return c.Channels
	}
	return c.Publishers
}

// newPublishers returns the publishers' clients: one for REST or, with Spread over several
// nodes, one per node (channel c's publisher uses client c mod N); and where the publishes go,
// for the report.
func (c MultichannelConfig) newPublishers() ([]*publisher, string, error) {
	bases := []string{c.REST}
	if c.Spread {
		nodes, err := c.restNodes()
		if err != nil {
			return nil, "", err
		}
		if len(nodes) > 1 {
			bases = nodes
		}
	}
	pubs := make([]*publisher, 0, len(bases))
	for _, base := range bases {
		t := c.Target
		t.REST = base
		p, err := newPublisher(t, c.PayloadBytes, max((c.publishers()+len(bases)-1)/len(bases), 1))
		if err != nil {
			for _, q := range pubs {
				q.close()
			}
			return nil, "", err
		}
		pubs = append(pubs, p)
	}
	return pubs, strings.Join(bases, ", "), nil
}

// publishToAll publishes seq, scheduled for sched, to every channel, maxChannelsPerTrigger a
// request, and records each request's time in requests.
func publishToAll(ctx context.Context, pub *publisher, names []string, seq int, sched time.Time, requests histogram) error {
	for i := 0; i < len(names); i += maxChannelsPerTrigger {
		took, err := pub.triggerAt(ctx, names[i:min(i+maxChannelsPerTrigger, len(names))], seq, sched)
		if err != nil {
			return err
		}
		requests.record(took.Nanoseconds())
	}
	return nil
}

// publishBursts publishes to each channel its burst of n events, seqs after+1 to after+n, as
// one batch_events request, publishers requests at once, and records each request's time in
// requests.
func publishBursts(ctx context.Context, pub *publisher, publishers int, names []string, after, n int, sched time.Time, requests histogram) error {
	errs := make([]error, publishers)
	took := newHistograms(publishers)
	defer func() {
		for _, h := range took {
			requests.merge(h)
		}
	}()
	var wg sync.WaitGroup
	for p := range publishers { // publisher p takes channels p, p+publishers, ...
		wg.Add(1)
		go func() {
			defer wg.Done()
			items := make([]item, n)
			for c := p; c < len(names); c += publishers {
				for k := range items {
					items[k] = item{channel: names[c], seq: after + k + 1}
				}
				d, err := pub.batchAt(ctx, items, sched)
				if err != nil {
					errs[p] = err
					return
				}
				took[p].record(d.Nanoseconds())
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WriteText writes the report as a readable block.
func (r *MultichannelReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "multichannel: %d subscribers over %d channels, %d rounds %gs apart of %d events to every channel, %d-byte data, %s\n",
		r.Subs, r.Channels, r.Rounds, r.IntervalSeconds, r.Burst, r.PayloadBytes, r.Server.on())
	fmt.Fprintf(b, "  publish      %s\n", r.publishText())
	writeSetup(b, r.Setup)
	writeDelivery(b, r.Delivery)
	writeLost(b, r.Lost, "subscribers")
	fmt.Fprintf(b, "  slow consumers %d disconnected with 4100\n", r.SlowConsumers)
	fmt.Fprintf(b, "  throughput   %.0f deliveries/s from the first publish to the last delivery\n", r.DeliveriesPerSec)
	fmt.Fprintf(b, "  publish request latency ms (each request, sent → answered)\n")
	fmt.Fprintf(b, "  %-12s %8s %7s %7s %7s %7s %7s %7s\n", "", "count", "min", "p50", "p95", "p99", "p99.9", "max")
	writeLatency(b, "requests", r.PublishLatency, "")
	fmt.Fprintf(b, "  latency ms from each event's send time (stamped just before its request)\n")
	fmt.Fprintf(b, "  %-12s %8s %7s %7s %7s %7s %7s %7s  %s\n", "", "count", "min", "p50", "p95", "p99", "p99.9", "max", "burst ms")
	writeLatency(b, "all", r.Latency, "")
	for _, rr := range r.PerRound {
		writeLatency(b, "round "+strconv.Itoa(rr.Round), rr.Latency, fmt.Sprintf("%8.1f", rr.PublishMs))
	}
	fmt.Fprintf(b, "  latency ms from the round's scheduled start (not hidden by a slow REST API); round = first publish → last delivery\n")
	fmt.Fprintf(b, "  %-12s %8s %7s %7s %7s %7s %7s %7s  %8s %8s\n", "", "count", "min", "p50", "p95", "p99", "p99.9", "max", "lag ms", "round ms")
	writeLatency(b, "all", r.LatencyFromSchedule, "")
	for _, rr := range r.PerRound {
		writeLatency(b, "round "+strconv.Itoa(rr.Round), rr.LatencyFromSchedule, fmt.Sprintf("%8.1f %8.1f", rr.StartLagMs, rr.CompletionMs))
	}
	writeUsage(b, r.ServerUsage, r.Generator)
	return b.Flush()
}

// publishText describes the publish pattern for the text report.
func (r *MultichannelReport) publishText() string {
	switch r.Publish {
	case "per-channel":
		return fmt.Sprintf("per-channel: %d publishers, one per channel, at once; each sends its channel's burst as %d single-event requests, each after the previous one's answer",
			r.Publishers, r.Burst)
	case "batch":
		return fmt.Sprintf("batch: each channel's burst one batch_events request, %d in flight at once", r.Publishers)
	}
	return "all-channels: each event one request naming every channel (100 a request at most), one after the other"
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// or returns v, or d when v is the zero value.
func or[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}
