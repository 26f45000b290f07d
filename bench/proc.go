package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// proc reads a process's CPU time and resident memory from /proc. The zero value reads nothing.
type proc struct{ dir string }

func procOf(pid int) proc { return proc{dir: "/proc/" + strconv.Itoa(pid)} }

func self() proc { return proc{dir: "/proc/self"} }

// cpu returns the process's user plus system CPU time.
func (p proc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(p.dir + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("read CPU time: unexpected %s/stat", p.dir)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("read CPU time: short %s/stat", p.dir)
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read CPU time: bad utime/stime in %s/stat", p.dir)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// writes returns how many write system calls (write, writev and the like) the process has
// made: syscw in /proc/<pid>/io; -1 when it cannot be read (another user's process).
func (p proc) writes() int64 {
	b, err := os.ReadFile(p.dir + "/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "syscw:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// rss returns the process's resident set size in bytes (VmRSS).
func (p proc) rss() (int64, error) {
	b, err := os.ReadFile(p.dir + "/status")
	if err != nil {
		return 0, fmt.Errorf("read RSS: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
			break
		}
	}
	return 0, fmt.Errorf("read RSS: no VmRSS in %s/status", p.dir)
}

// Usage is a process's CPU time over a window and its RSS at the window's end.
type Usage struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPerDeliveryMicros is CPUSeconds per delivery, in microseconds.
	CPUPerDeliveryMicros float64 `json:"cpu_per_delivery_us,omitempty"`
	RSSBytes             int64   `json:"rss_bytes"`
	// RSSPerConnBytes is the growth of RSS from before connecting to every connection open,
	// per connection (idle only).
	RSSPerConnBytes float64 `json:"rss_per_conn_bytes,omitempty"`
	Procs           int     `json:"procs,omitempty"` // processes measured together (with --procs)
	// WriteCalls are the server's write system calls over the window (its nodes', not the
	// bus servers'; 0: not known), and DeliveriesPerWrite the deliveries over them: how many
	// frames the server gets out per write.
	WriteCalls         int64   `json:"write_calls,omitempty"`
	DeliveriesPerWrite float64 `json:"deliveries_per_write,omitempty"`
	// Nodes are the server's figures per node, with one --server-pid per node; CPUSeconds and
	// RSSBytes are then their sums.
	Nodes []NodeUsage `json:"nodes,omitempty"`
	// Bus are the bus servers' figures (--bus-pid): their CPU time is in CPUSeconds (and in
	// the CPU per delivery), their RSS is not in RSSBytes.
	Bus []BusUsage `json:"bus,omitempty"`
}

// meter is a process, or several measured as one.
type meter interface {
	cpu() (time.Duration, error)
	rss() (int64, error)
}

// procGroup is the generator: this process and its children, measured as one.
type procGroup []proc

func generator(children []int) procGroup {
	g := procGroup{self()}
	for _, pid := range children {
		g = append(g, procOf(pid))
	}
	return g
}

func (g procGroup) cpu() (time.Duration, error) {
	var sum time.Duration
	for _, p := range g {
		d, err := p.cpu()
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

func (g procGroup) rss() (int64, error) {
	var sum int64
	for _, p := range g {
		n, err := p.rss()
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// cpuWindow measures CPU time between start and stop.
type cpuWindow struct {
	p     meter
	start time.Duration
	err   error
}

func startCPU(m meter) *cpuWindow {
	w := &cpuWindow{p: m}
	w.start, w.err = m.cpu()
	return w
}

func (p proc) startCPU() *cpuWindow { return startCPU(p) }

// stop returns the CPU time and RSS since start.
func (w *cpuWindow) stop() (Usage, error) {
	if w.err != nil {
		return Usage{}, w.err
	}
	end, err := w.p.cpu()
	if err != nil {
		return Usage{}, err
	}
	rss, err := w.p.rss()
	if err != nil {
		return Usage{}, err
	}
	return Usage{CPUSeconds: (end - w.start).Seconds(), RSSBytes: rss}, nil
}
