package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ChannelsConfig configures the channels scenario. The zero value of each field means its
// default.
type ChannelsConfig struct {
	Target
	Channels int // channels, one subscriber each, spread over the nodes; default 10,000
	Requests int // GET /channels requests timed, one after another; default 100
	// Settle is how long the REST node has to list every channel before the timed requests;
	// default 10s.
	Settle time.Duration
}

func (c ChannelsConfig) withDefaults() ChannelsConfig {
	c.Target = c.Target.withDefaults()
	c.Channels = or(c.Channels, 10000)
	c.Requests = or(c.Requests, 100)
	c.Settle = or(c.Settle, 10*time.Second)
	return c
}

func (c ChannelsConfig) check() error {
	errs := []error{c.Target.check()}
	if _, _, err := c.restURL("/channels"); err != nil {
		errs = append(errs, err)
	}
	if c.Procs > 1 {
		errs = append(errs, errors.New("--procs: channels runs in one process"))
	}
	if c.Channels < 0 || c.Requests < 0 {
		errs = append(errs, errors.New("--channels and --requests must be positive"))
	}
	if c.Settle < 0 {
		errs = append(errs, errors.New("--settle must not be negative"))
	}
	return errors.Join(errs...)
}

// ChannelsReport is the result of Channels.
type ChannelsReport struct {
	Scenario string     `json:"scenario"` // "channels"
	Server   ServerInfo `json:"server"`
	Channels int        `json:"channels"`
	Requests int        `json:"requests"`
	Setup    Setup      `json:"setup"`
	// Listed is when the REST node (Listed.Nodes) first listed every channel, after the last
	// subscription.
	Listed RESTCheck `json:"listed"`
	// Wrong counts timed answers that did not list exactly Channels channels; LastCount is
	// how many the last answer listed.
	Wrong          int     `json:"wrong"`
	LastCount      int     `json:"last_count"`
	ResponseBytes  int     `json:"response_bytes"` // of the last answer
	Latency        Latency `json:"latency"`        // per request, the body read
	RequestsPerSec float64 `json:"requests_per_sec"`
	Lost           Lost    `json:"lost"`
	// ServerUsage and Generator are CPU time over the timed requests.
	ServerUsage           *Usage  `json:"server_usage,omitempty"`
	ServerCPUPerRequestUs float64 `json:"server_cpu_per_request_us,omitempty"`
	Generator             Usage   `json:"generator"`
	Timeline              []Point `json:"timeline,omitempty"`
}

// Clean reports whether every subscriber subscribed and stayed, the channels were listed in
// time and every timed answer listed them all.
func (r *ChannelsReport) Clean() bool {
	return r.Setup.Failed == 0 && r.Lost.Count == 0 && r.Listed.OK && r.Wrong == 0
}

// Channels subscribes one client to each of cfg.Channels channels ("chan-0", ...), client i
// on node i mod N, waits until the REST node's GET /apps/{id}/channels lists them all (the
// other nodes' channels reach it over the cluster), then times cfg.Requests more of them, one
// after another.
func Channels(ctx context.Context, cfg ChannelsConfig) (rep *ChannelsReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep = &ChannelsReport{Scenario: "channels", Server: cfg.info(false), Channels: cfg.Channels, Requests: cfg.Requests}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	names := make([]string, cfg.Channels)
	for i := range names {
		names[i] = "chan-" + strconv.Itoa(i)
	}
	pub, err := newPublisher(cfg.Target, 0, 1)
	if err != nil {
		return nil, err
	}
	defer pub.close()
	rec := newRecorder(names, 0, cfg.Timeline)
	p, err := newPool(rec, cfg.Timeline)
	if err != nil {
		return nil, err
	}
	defer p.close(cfg.Timeout)
	rep.Setup, err = connect(ctx, cfg.Target, p, 0, cfg.Channels, subSpec{Channels: names}.chansOf())
	if err != nil {
		return rep, err
	}
	want := rep.Setup.Established
	rep.Listed = pollChannels(ctx, pub, cfg.Target, []string{cfg.REST}, nil, cfg.Settle, func(list map[string]channelInfo) string {
		if len(list) != want {
			return fmt.Sprintf("%d channels listed; %d subscribed", len(list), want)
		}
		return ""
	})
	if !rep.Listed.OK {
		rep.Lost = p.lostSoFar()
		return rep, nil
	}

	h := newHistogram()
	serverCPU := cfg.serverProcs().startCPU()
	genCPU := self().startCPU()
	start := time.Now()
	for range cfg.Requests {
		list, size, took, err := channelList(ctx, pub, cfg.Target, cfg.REST, nil)
		if err != nil {
			return rep, err
		}
		h.record(took.Nanoseconds())
		rep.LastCount, rep.ResponseBytes = len(list), size
		if len(list) != want {
			rep.Wrong++
		}
	}
	if s := time.Since(start).Seconds(); s > 0 {
		rep.RequestsPerSec = float64(cfg.Requests) / s
	}
	if serverCPU != nil {
		if rep.ServerUsage, err = serverCPU.stop(); err != nil {
			return rep, err
		}
		rep.ServerCPUPerRequestUs = rep.ServerUsage.CPUSeconds * 1e6 / float64(max(cfg.Requests, 1))
	}
	if u, err := genCPU.stop(); err == nil {
		rep.Generator = u
	}
	rep.Latency = h.summary()
	rep.Lost = p.lostSoFar()
	return rep, p.close(cfg.Timeout)
}

// WriteText writes the report as a readable block.
func (r *ChannelsReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "channels: %d channels with one subscriber each, %d GET %s, %s\n", r.Channels, r.Requests, r.Listed.Request, r.Server.on())
	writeSetup(b, r.Setup)
	writeLost(b, r.Lost, "subscribers")
	writeRESTCheck(b, "listed", fmt.Sprintf("all %d channels listed", r.Setup.Established), &r.Listed)
	if r.Latency.Count > 0 {
		fmt.Fprintf(b, "  answers      %d, %d not listing exactly %d channels; the last listed %d in %d bytes; %.0f requests/s\n",
			r.Latency.Count, r.Wrong, r.Setup.Established, r.LastCount, r.ResponseBytes, r.RequestsPerSec)
		fmt.Fprintf(b, "  latency ms   %8s %7s %7s %7s %7s %7s %7s\n", "count", "min", "p50", "p95", "p99", "p99.9", "max")
		writeLatency(b, "GET", r.Latency, "")
		writeCPU(b, r.ServerUsage, r.Generator, "over the timed requests", "request", r.ServerCPUPerRequestUs,
			r.Generator.CPUSeconds*1e6/float64(max(r.Latency.Count, 1)))
	}
	return b.Flush()
}
