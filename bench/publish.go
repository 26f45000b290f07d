package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// PublishConfig configures the publish scenario. The zero value of each field means its
// default.
type PublishConfig struct {
	Target
	Publishers   int           // concurrent publishers, each with its own keep-alive connection; default 8
	Channels     int           // channels, one subscriber each; default 100, at least Publishers
	Duration     time.Duration // how long publishers publish; default 10s
	Batch        int           // events per batch_events request; 0 means one per /events request
	PayloadBytes int           // default 100
	Wait         time.Duration // after the last publish, how long to wait for deliveries; default 5s
}

// maxBatch is Pusher's limit of events per batch_events request.
const maxBatch = 10

// publishMaxSeq bounds the seqs a publish subscriber stores per channel (a bitmap of 512 KiB).
const publishMaxSeq = 1 << 22

func (c PublishConfig) withDefaults() PublishConfig {
	c.Target = c.Target.withDefaults()
	c.Publishers = or(c.Publishers, 8)
	c.Channels = or(c.Channels, max(100, c.Publishers))
	c.Duration = or(c.Duration, 10*time.Second)
	c.PayloadBytes = or(c.PayloadBytes, 100)
	c.Wait = or(c.Wait, 5*time.Second)
	return c
}

func (c PublishConfig) check() error {
	errs := []error{c.Target.check()}
	if _, _, err := c.eventsURL(); err != nil {
		errs = append(errs, err)
	}
	if c.Procs > 1 {
		errs = append(errs, errors.New("--procs: publish runs in one process"))
	}
	if c.Publishers < 0 || c.Channels < c.Publishers || c.PayloadBytes < 0 {
		errs = append(errs, errors.New("--publishers and --payload must be positive, --channels at least --publishers"))
	}
	if c.Batch < 0 || c.Batch > maxBatch {
		errs = append(errs, errors.New("--batch must be between 0 and 10"))
	}
	if c.Duration < 0 || c.Wait < 0 {
		errs = append(errs, errors.New("--duration and --wait must not be negative"))
	}
	return errors.Join(errs...)
}

// PublishReport is the result of Publish.
type PublishReport struct {
	Scenario        string     `json:"scenario"` // "publish"
	Server          ServerInfo `json:"server"`
	Publishers      int        `json:"publishers"`
	Channels        int        `json:"channels"`
	Batch           int        `json:"batch"`
	DurationSeconds float64    `json:"duration_seconds"`
	PayloadBytes    int        `json:"payload_bytes"`
	Setup           Setup      `json:"setup"`
	Requests        int64      `json:"requests"`
	FailedRequests  int64      `json:"failed_requests"`
	FirstError      string     `json:"first_error,omitempty"`
	Accepted        int64      `json:"accepted"`         // events in requests answered 200
	AcceptedPerSec  float64    `json:"accepted_per_sec"` // over the publishing time
	PublishLatency  Latency    `json:"publish_latency"`  // per request
	Delivery        Delivery   `json:"delivery"`
	Latency         Latency    `json:"latency"` // publish → receive
	Lost            Lost       `json:"lost"`
	ServerUsage     *Usage     `json:"server_usage,omitempty"`
	Generator       Usage      `json:"generator"`
	Timeline        []Point    `json:"timeline,omitempty"`
}

// Publish subscribes one client to each of cfg.Channels channels ("pub-0", ...), then runs
// cfg.Publishers publishers for cfg.Duration (each makes one request at least), each posting to its own share of the channels
// (channel c belongs to publisher c mod Publishers, so each channel's events are published in
// order) as fast as the server answers: one event per request, or cfg.Batch per batch_events
// request.
func Publish(ctx context.Context, cfg PublishConfig) (rep *PublishReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep = &PublishReport{Scenario: "publish", Server: cfg.info(true), Publishers: cfg.Publishers, Channels: cfg.Channels,
		Batch: cfg.Batch, DurationSeconds: cfg.Duration.Seconds(), PayloadBytes: cfg.PayloadBytes}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	names := make([]string, cfg.Channels)
	for i := range names {
		names[i] = "pub-" + strconv.Itoa(i)
	}
	pub, err := newPublisher(cfg.Target, cfg.PayloadBytes, cfg.Publishers)
	if err != nil {
		return nil, err
	}
	defer pub.close()
	seq := newSequence(cfg.Channels)
	rec := newRecorder(names, publishMaxSeq, cfg.Timeline)
	p, err := newPool(rec, cfg.Timeline)
	if err != nil {
		return nil, err
	}
	defer p.close(cfg.Timeout)
	rep.Setup, err = connect(ctx, cfg.Target, p, 0, cfg.Channels, subSpec{Channels: names}.chansOf())
	if err != nil {
		return rep, err
	}

	serverCPU := cfg.serverProcs().startCPU()
	genCPU := self().startCPU()
	start := time.Now()
	st := runPublishers(ctx, cfg, pub, names, seq)
	rep.Requests, rep.FailedRequests, rep.Accepted = st.requests.Load(), st.failed.Load(), st.accepted.Load()
	rep.AcceptedPerSec = float64(rep.Accepted) / time.Since(start).Seconds()
	rep.PublishLatency = st.latency.summary()
	if st.firstErr != nil {
		rep.FirstError = st.firstErr.Error()
		if rep.Accepted == 0 {
			return rep, st.firstErr
		}
	}
	if rep.Requests == 0 {
		return rep, nothingMeasured("no publish request was made in %v", cfg.Duration)
	}
	var expected int64
	for ch := range names {
		expected += int64(seq.last(ch)) - int64(len(seq.failedOn(ch)))
	}
	rec.expect(expected)
	waitStart := time.Now()
	rep.Delivery.Complete = rec.await(ctx, cfg.Wait)
	rep.Delivery.WaitSeconds = time.Since(waitStart).Seconds()
	if serverCPU != nil {
		if u, err := serverCPU.stop(); err == nil {
			rep.ServerUsage = u
		}
	}
	if u, err := genCPU.stop(); err == nil {
		rep.Generator = u
	}
	rep.Lost = p.lostSoFar()
	if err := p.close(cfg.Timeout); err != nil {
		return rep, err
	}
	complete, wait := rep.Delivery.Complete, rep.Delivery.WaitSeconds
	rep.Delivery = p.delivery(func(ch int) int32 { return seq.last(ch) }, seq.failedOn)
	rep.Delivery.Complete, rep.Delivery.WaitSeconds = complete, wait
	rep.Latency = rec.tally().Latency.summary()
	if d := float64(rep.Delivery.Delivered); d > 0 {
		if rep.ServerUsage != nil {
			rep.ServerUsage.CPUPerDeliveryMicros = rep.ServerUsage.CPUSeconds * 1e6 / d
		}
		rep.Generator.CPUPerDeliveryMicros = rep.Generator.CPUSeconds * 1e6 / d
	}
	return rep, checkDelivered(rep.Delivery)
}

// publishStats is what the publishers did.
type publishStats struct {
	requests, failed, accepted atomic.Int64
	mu                         sync.Mutex
	latency                    histogram
	firstErr                   error
}

// runPublishers runs cfg.Publishers publishers until cfg.Duration has passed, or every one has
// failed giveUpAfter times in a row; each makes at least one request.
func runPublishers(ctx context.Context, cfg PublishConfig, pub *publisher, names []string, seq *sequence) *publishStats {
	st := &publishStats{latency: newHistogram()}
	end := time.Now().Add(cfg.Duration) // requests started before it run to their end
	var wg sync.WaitGroup
	for k := range cfg.Publishers {
		var mine []int
		for ch := k; ch < len(names); ch += cfg.Publishers {
			mine = append(mine, ch)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := newHistogram()
			defer func() { st.mu.Lock(); st.latency.merge(h); st.mu.Unlock() }()
			next, failures := 0, 0
			// Every publisher makes at least one request, however short the duration: a run
			// that made none would have measured nothing, and a rejected one must be seen.
			for first := true; first || time.Now().Before(end) && failures < giveUpAfter && ctx.Err() == nil; first = false {
				items := make([]item, max(cfg.Batch, 1))
				for i := range items {
					ch := mine[next%len(mine)]
					next++
					items[i] = item{channel: names[ch], seq: seq.next(ch)}
				}
				var took time.Duration
				var err error
				if cfg.Batch == 0 {
					took, err = pub.trigger(ctx, []string{items[0].channel}, items[0].seq)
				} else {
					took, err = pub.batch(ctx, items)
				}
				st.requests.Add(1)
				if err != nil {
					failures++
					st.failed.Add(1)
					for i, it := range items {
						seq.fail(mine[(next-len(items)+i)%len(mine)], it.seq)
					}
					st.mu.Lock()
					if st.firstErr == nil {
						st.firstErr = err
					}
					st.mu.Unlock()
					continue
				}
				failures = 0
				h.record(took.Nanoseconds())
				st.accepted.Add(int64(len(items)))
			}
		}()
	}
	wg.Wait()
	return st
}

// WriteText writes the report as a readable block.
func (r *PublishReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	how := "one event per /events request"
	if r.Batch > 0 {
		how = fmt.Sprintf("%d events per batch_events request", r.Batch)
	}
	fmt.Fprintf(b, "publish: %d publishers for %gs, %s, to %d channels with one subscriber each, %d-byte data, %s\n",
		r.Publishers, r.DurationSeconds, how, r.Channels, r.PayloadBytes, r.Server.on())
	writeSetup(b, r.Setup)
	fmt.Fprintf(b, "  published    %d requests, %d failed; %d events accepted = %.0f events/s\n", r.Requests, r.FailedRequests, r.Accepted, r.AcceptedPerSec)
	if r.FirstError != "" {
		fmt.Fprintf(b, "               first failure: %s\n", r.FirstError)
	}
	writeDelivery(b, r.Delivery)
	writeLost(b, r.Lost, "subscribers")
	fmt.Fprintf(b, "  latency ms   %8s %7s %7s %7s %7s %7s %7s\n", "count", "min", "p50", "p95", "p99", "p99.9", "max")
	writeLatency(b, "request", r.PublishLatency, "")
	writeLatency(b, "delivery", r.Latency, "")
	writeUsage(b, r.ServerUsage, r.Generator)
	return b.Flush()
}
