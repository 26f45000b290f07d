package bench

import (
	"context"
	"time"
)

// serverProcs is the server under test as processes on this machine (Target.ServerPIDs): one
// for the whole server, or one per node. The zero value measures nothing.
type serverProcs struct {
	pids  []int
	nodes []string // each pid's node, WebSocket URL; nil unless there is one pid per node
	bus   []int    // the bus servers' pids: CPU windows count them too
}

func (t Target) serverProcs() serverProcs {
	s := serverProcs{pids: t.ServerPIDs, bus: t.BusPIDs}
	if len(t.ServerPIDs) > 1 {
		s.nodes, _ = t.wsNodes() // check made them one per node
	}
	return s
}

// ok reports whether there is a process to measure.
func (s serverProcs) ok() bool { return len(s.pids) > 0 }

// perNode reports whether each node has its own process, measured apart.
func (s serverProcs) perNode() bool { return len(s.pids) > 1 }

func (s serverProcs) procs() []proc {
	ps := make([]proc, len(s.pids))
	for k, pid := range s.pids {
		ps[k] = procOf(pid)
	}
	return ps
}

// meter measures every process as one (CPU and RSS summed), or nil without pids.
func (s serverProcs) meter() meter {
	if !s.ok() {
		return nil
	}
	return procGroup(s.procs())
}

// rss reads each process's RSS.
func (s serverProcs) rss() ([]int64, error) {
	out := make([]int64, len(s.pids))
	for k, p := range s.procs() {
		n, err := p.rss()
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

// NodeUsage is one node's process over a Usage's window, with one --server-pid per node.
type NodeUsage struct {
	WS         string  `json:"ws"`
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpu_seconds"`
	RSSBytes   int64   `json:"rss_bytes"`
}

// BusUsage is one bus server's process over a Usage's window (--bus-pid).
type BusUsage struct {
	PID        int     `json:"pid"`
	CPUSeconds float64 `json:"cpu_seconds"`
	RSSBytes   int64   `json:"rss_bytes"`
}

// serverWindow measures the server's CPU time between startCPU and stop, process by process.
type serverWindow struct {
	s      serverProcs
	w      []*cpuWindow
	bus    []*cpuWindow
	writes []int64 // each process's write calls at the start
}

// startCPU starts measuring; nil without pids.
func (s serverProcs) startCPU() *serverWindow {
	if !s.ok() {
		return nil
	}
	sw := &serverWindow{s: s}
	for _, p := range s.procs() {
		sw.w = append(sw.w, startCPU(p))
		sw.writes = append(sw.writes, p.writes())
	}
	for _, pid := range s.bus {
		sw.bus = append(sw.bus, startCPU(procOf(pid)))
	}
	return sw
}

// stop returns the CPU time since startCPU and the RSS now, summed over the processes, and
// each node's with one process per node; the bus servers' CPU time is in the sum, their RSS
// is not (it is in Bus).
func (sw *serverWindow) stop() (*Usage, error) {
	u := &Usage{}
	known := true
	for k, w := range sw.w {
		n, err := w.stop()
		if err != nil {
			return nil, err
		}
		end := sw.s.procs()[k].writes()
		known = known && end >= 0 && sw.writes[k] >= 0
		u.WriteCalls += end - sw.writes[k]
		u.CPUSeconds += n.CPUSeconds
		u.RSSBytes += n.RSSBytes
		if sw.s.perNode() {
			u.Nodes = append(u.Nodes, NodeUsage{WS: sw.s.nodes[k], PID: sw.s.pids[k], CPUSeconds: n.CPUSeconds, RSSBytes: n.RSSBytes})
		}
	}
	if !known {
		u.WriteCalls = 0
	}
	for k, w := range sw.bus {
		n, err := w.stop()
		if err != nil {
			return nil, err
		}
		u.CPUSeconds += n.CPUSeconds
		u.Bus = append(u.Bus, BusUsage{PID: sw.s.bus[k], CPUSeconds: n.CPUSeconds, RSSBytes: n.RSSBytes})
	}
	return u, nil
}

// NodeRSS is one node's resident memory before and after the connections were made, with
// one --server-pid per node.
type NodeRSS struct {
	WS            string `json:"ws"`
	PID           int    `json:"pid"`
	BaselineBytes int64  `json:"baseline_bytes"`
	AfterBytes    int64  `json:"after_bytes"`
	Connections   int    `json:"connections"` // the run's connections on the node
	// PerConnBytes is (AfterBytes - BaselineBytes) / Connections.
	PerConnBytes float64 `json:"per_conn_bytes"`
	PerConnKiB   float64 `json:"per_conn_kib"`
}

// fill sets r's totals (sums over the processes) and, with one process per node, its
// nodes: base and after are each process's RSS, conns the run's connections on each node
// (nil: not known per node), total all of them.
func (r *ServerRSS) fill(s serverProcs, base, after []int64, conns []int, total int) {
	r.BaselineBytes, r.AfterBytes = 0, 0
	for k := range base {
		r.BaselineBytes += base[k]
		r.AfterBytes += after[k]
	}
	r.PerConnBytes, r.PerConnKiB = 0, 0
	if total > 0 {
		r.PerConnBytes = float64(r.AfterBytes-r.BaselineBytes) / float64(total)
		r.PerConnKiB = r.PerConnBytes / 1024
	}
	r.Nodes = nil
	if !s.perNode() {
		return
	}
	for k, pid := range s.pids {
		n := NodeRSS{WS: s.nodes[k], PID: pid, BaselineBytes: base[k], AfterBytes: after[k]}
		if k < len(conns) {
			n.Connections = conns[k]
		}
		if n.Connections > 0 {
			n.PerConnBytes = float64(n.AfterBytes-n.BaselineBytes) / float64(n.Connections)
			n.PerConnKiB = n.PerConnBytes / 1024
		}
		r.Nodes = append(r.Nodes, n)
	}
}

// settle samples every process's RSS each rssInterval until each has stopped changing
// (rssStableSamples in a row within 1%), or rssSettleMax passes, and returns the last samples.
func (s serverProcs) settle(ctx context.Context) (after []int64, settled bool, took time.Duration, err error) {
	start := time.Now()
	recent := make([][]int64, len(s.pids))
	tick := time.NewTicker(rssInterval)
	defer tick.Stop()
	for {
		if after, err = s.rss(); err != nil {
			return nil, false, 0, err
		}
		settled = true
		for k, n := range after {
			recent[k] = append(recent[k], n)
			if len(recent[k]) > rssStableSamples {
				recent[k] = recent[k][1:]
			}
			settled = settled && len(recent[k]) == rssStableSamples && stable(recent[k])
		}
		if settled || time.Since(start) >= rssSettleMax {
			return after, settled, time.Since(start), nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, false, 0, context.Cause(ctx)
		}
	}
}
