package bench

import (
	"context"
	"time"
)

// IdlePhase is what fanout measures between subscribing and publishing when asked to
// (FanoutConfig.Idle): the memory the connections take, user space and kernel, and the CPU
// they cost while idle, the clients keeping pusher-js's activity check.
type IdlePhase struct {
	ServerRSS *ServerRSS    `json:"server_rss,omitempty"` // nil without a server pid
	Kernel    *KernelMemory `json:"kernel,omitempty"`     // nil where /proc has no figures
	// Generator's RSS with every connection open, and its growth per connection.
	Generator Usage        `json:"generator"`
	Windows   []IdleWindow `json:"windows"`
}

// IdleWindow is one quiet stretch: no publish, the connections only pinging.
type IdleWindow struct {
	Seconds float64 `json:"seconds"`
	// ClientActivitySeconds is the clients' own activity timeout (pusher-js's activityTimeout
	// option) during the window; the server's activity_timeout caps it; 0: they never ping first.
	ClientActivitySeconds float64 `json:"client_activity_seconds"`
	// Server is the nodes' and the bus servers' CPU over the window (nil without a pid).
	Server *Usage `json:"server,omitempty"`
	// NodesMicrosPerConnSec is the nodes' CPU time (the bus's not in it) per connection per
	// second of the window, in µs; BusMicrosPerConnSec the bus servers'; GeneratorMicros... the
	// clients'.
	NodesMicrosPerConnSec     float64    `json:"nodes_us_per_conn_s"`
	BusMicrosPerConnSec       float64    `json:"bus_us_per_conn_s"`
	Generator                 Usage      `json:"generator"`
	GeneratorMicrosPerConnSec float64    `json:"generator_us_per_conn_s"`
	Pings                     PingCounts `json:"pings"`
	// NodesMicrosPerPing is the nodes' CPU time over the window per ping exchange (a client's
	// ping and its pong, or the server's), in µs: it counts the nodes' idle work too.
	NodesMicrosPerPing float64 `json:"nodes_us_per_ping"`
}

// idlePhase measures the connections g holds once set up: the server's RSS once it settles
// (base: each server process's RSS before connecting), the kernel's memory against k0 (the
// sample before connecting), then each window in turn with the clients' own activity timeout
// set to its activity (0: the run's), which it puts back after the last.
func idlePhase(ctx context.Context, t Target, g subscribers, base []int64, k0 kernelSample, kernelOK bool, windows []idleSpec) (*IdlePhase, error) {
	ph := &IdlePhase{}
	conns := g.setup().Established
	server := t.serverProcs()
	if server.ok() {
		after, settled, took, err := server.settle(ctx)
		if err != nil {
			return ph, err
		}
		ph.ServerRSS = &ServerRSS{Settled: settled, SettleSeconds: took.Seconds()}
		ph.ServerRSS.fill(server, base, after, g.setup().PerNode, conns)
	}
	if k1, ok := readKernel(); ok && kernelOK {
		ph.Kernel = kernelMemory(k0, k1, conns)
	}
	gen := generator(g.pids())
	ph.Generator.Procs = len(gen)
	if rss, err := gen.rss(); err == nil && conns > 0 {
		ph.Generator.RSSBytes = rss
		ph.Generator.RSSPerConnBytes = float64(rss-g.rssBefore()) / float64(conns)
	}
	own := t.ActivityTimeout
	if own == 0 {
		own = DefaultActivityTimeout
	}
	for _, w := range windows {
		activity := w.activity
		if activity == 0 {
			activity = own
		}
		c0, err := g.pings(ctx, activity)
		if err != nil {
			return ph, err
		}
		sw := server.startCPU()
		gw := startCPU(gen)
		start := time.Now()
		if err := sleepUntil(ctx, start.Add(w.d)); err != nil {
			return ph, err
		}
		win := IdleWindow{Seconds: time.Since(start).Seconds(), ClientActivitySeconds: max(activity, 0).Seconds()}
		if sw != nil {
			if win.Server, err = sw.stop(); err != nil {
				return ph, err
			}
		}
		if u, err := gw.stop(); err == nil {
			win.Generator = u
			win.Generator.Procs = len(gen)
		}
		c1, err := g.pings(ctx, 0)
		if err != nil {
			return ph, err
		}
		win.Pings = c1.minus(c0)
		if per := float64(conns) * win.Seconds; per > 0 {
			if u := win.Server; u != nil {
				bus := 0.0
				for _, b := range u.Bus {
					bus += b.CPUSeconds
				}
				win.NodesMicrosPerConnSec = (u.CPUSeconds - bus) * 1e6 / per
				win.BusMicrosPerConnSec = bus * 1e6 / per
				if n := win.Pings.Sent + win.Pings.Answered; n > 0 {
					win.NodesMicrosPerPing = (u.CPUSeconds - bus) * 1e6 / float64(n)
				}
			}
			win.GeneratorMicrosPerConnSec = win.Generator.CPUSeconds * 1e6 / per
		}
		ph.Windows = append(ph.Windows, win)
	}
	if len(windows) > 0 {
		if _, err := g.pings(ctx, own); err != nil {
			return ph, err
		}
	}
	return ph, nil
}

// idleSpec is one idle window: how long, and the clients' own activity timeout in it (0: the
// run's).
type idleSpec struct {
	d        time.Duration
	activity time.Duration
}
