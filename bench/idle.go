package bench

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// IdleConfig configures the idle scenario. The zero value of each field means its default.
type IdleConfig struct {
	Target
	Conns    int           // connections; default 1000
	Channels int           // public channels they are spread over, round robin; default 10
	Hold     time.Duration // how long to keep them open after measuring; default 0
}

func (c IdleConfig) withDefaults() IdleConfig {
	c.Target = c.Target.withDefaults()
	if c.Conns == 0 {
		c.Conns = 1000
	}
	if c.Channels == 0 {
		c.Channels = 10
	}
	return c
}

func (c IdleConfig) check() error {
	var errs []error
	if err := c.Target.check(); err != nil {
		errs = append(errs, err)
	}
	if c.Conns < 0 {
		errs = append(errs, errors.New("--conns must be positive"))
	}
	if c.Channels < 0 {
		errs = append(errs, errors.New("--channels must be positive"))
	}
	if c.Hold < 0 {
		errs = append(errs, errors.New("--hold must not be negative"))
	}
	return errors.Join(errs...)
}

// RSSSettle is how the server's RSS is read after connecting: every rssInterval until
// rssStableSamples samples in a row agree within 1%, or rssSettleMax passes.
const (
	rssInterval      = 500 * time.Millisecond
	rssStableSamples = 3
	rssSettleMax     = 10 * time.Second
)

// ServerRSS is the server's resident memory before and after the connections were made.
type ServerRSS struct {
	BaselineBytes int64   `json:"baseline_bytes"` // sampled before connecting
	AfterBytes    int64   `json:"after_bytes"`    // sampled once it settled
	Settled       bool    `json:"settled"`        // false: still moving when the settle time ran out
	SettleSeconds float64 `json:"settle_seconds"`
	// PerConnBytes is (AfterBytes - BaselineBytes) / established connections: user-space memory
	// per connection (the kernel's socket buffers are extra).
	PerConnBytes float64 `json:"per_conn_bytes"`
	PerConnKiB   float64 `json:"per_conn_kib"`
	// Nodes are the same figures per node, with one --server-pid per node; the fields above
	// are then their sums, and PerConnBytes the growth of the sum over every connection.
	Nodes []NodeRSS `json:"nodes,omitempty"`
}

// IdleReport is the result of Idle.
type IdleReport struct {
	Scenario     string     `json:"scenario"` // "idle"
	Server       ServerInfo `json:"server"`
	Conns        int        `json:"conns"`
	Channels     int        `json:"channels"`
	Setup        Setup      `json:"setup"`
	ServerRSS    *ServerRSS `json:"server_rss,omitempty"` // nil without a server pid
	HoldSeconds  float64    `json:"hold_seconds"`
	Lost         Lost       `json:"lost"` // connections ended by the server before the close phase
	CloseSeconds float64    `json:"close_seconds"`
	// Generator is the load generator's own CPU time up to the close phase, its RSS with every
	// connection open and that RSS's growth per connection.
	Generator Usage   `json:"generator"`
	Timeline  []Point `json:"timeline,omitempty"`
}

// Idle opens cfg.Conns subscribed connections over cfg.Channels public channels ("idle-0",
// "idle-1", ...), measures the server's RSS once it settles and the generator's own, holds
// them for cfg.Hold and closes them.
func Idle(ctx context.Context, cfg IdleConfig) (rep *IdleReport, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep = &IdleReport{Scenario: "idle", Server: cfg.info(false), Conns: cfg.Conns, Channels: cfg.Channels}
	defer func() { rep.Timeline = timelinePoints(cfg.Timeline) }()
	cpu0, _ := self().cpu()
	server := cfg.serverProcs()
	var base []int64
	if server.ok() {
		if base, err = server.rss(); err != nil {
			return nil, err
		}
		rep.ServerRSS = &ServerRSS{}
		rep.ServerRSS.fill(server, base, make([]int64, len(base)), nil, 0)
	}

	names := make([]string, cfg.Channels)
	for i := range names {
		names[i] = "idle-" + strconv.Itoa(i)
	}
	g, err := subscribe(ctx, cfg.Target, subSpec{Conns: cfg.Conns, Channels: names})
	if g != nil {
		rep.Setup = g.setup()
	}
	if err == nil && rep.Setup.Established == 0 {
		g.abort()
		err = nothingMeasured("none of %d connections subscribed", cfg.Conns)
	}
	if err != nil {
		return rep, err
	}
	finished := false
	defer func() {
		if !finished {
			g.abort()
		}
	}()

	if server.ok() {
		after, settled, took, err := server.settle(ctx)
		if err != nil {
			return rep, err
		}
		rep.ServerRSS.fill(server, base, after, rep.Setup.PerNode, rep.Setup.Established)
		rep.ServerRSS.Settled, rep.ServerRSS.SettleSeconds = settled, took.Seconds()
	}
	gen := generator(g.pids())
	rep.Generator.Procs = len(gen)
	if rss, err := gen.rss(); err == nil {
		rep.Generator.RSSBytes = rss
		rep.Generator.RSSPerConnBytes = float64(rss-g.rssBefore()) / float64(rep.Setup.Established)
	}
	if cfg.Hold > 0 {
		if err := sleepUntil(ctx, time.Now().Add(cfg.Hold)); err != nil {
			return rep, err
		}
		rep.HoldSeconds = cfg.Hold.Seconds()
	}
	cpu1, _ := gen.cpu()

	start := time.Now()
	finished = true
	t, err := g.finish(ctx)
	if err != nil {
		return rep, err
	}
	rep.CloseSeconds = time.Since(start).Seconds()
	rep.Lost = t.Lost
	rep.Generator.CPUSeconds = (cpu1 - cpu0).Seconds()
	return rep, nil
}

// stable reports whether the samples lie within 1% of their largest.
func stable(s []int64) bool {
	lo, hi := s[0], s[0]
	for _, v := range s {
		lo, hi = min(lo, v), max(hi, v)
	}
	return (hi-lo)*100 <= hi
}
