package guard

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryConfig tunes the memory guard. The guard refuses new connections once the process
// uses more than RefuseAbove of Limit and accepts them again only below AcceptBelow, so a
// node near its limit does not flap between the two.
type MemoryConfig struct {
	// Limit is in bytes; 0 = DetectMemoryLimit (on Linux the cgroup's memory.max, else the
	// machine's total memory).
	Limit       uint64
	RefuseAbove float64 // fraction of Limit; default 0.90
	AcceptBelow float64 // fraction of Limit, below RefuseAbove; default 0.80
	// Interval is the spacing of the samples near the refusal threshold; default 250ms (far
	// below it, up to 8 times that: Start).
	Interval time.Duration
	// Read returns the bytes the process uses now; default: its resident set size.
	Read func() (uint64, error)
}

// Memory is the memory guard. Refusing is one atomic load.
type Memory struct {
	cfg      MemoryConfig
	log      *slog.Logger
	refusing atomic.Bool
	used     atomic.Uint64
	trips    atomic.Int64
	started  atomic.Bool

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewMemory builds the guard, detecting the limit when cfg.Limit is 0. It does not sample
// until Start.
func NewMemory(cfg MemoryConfig, log *slog.Logger) (*Memory, error) {
	if cfg.RefuseAbove <= 0 {
		cfg.RefuseAbove = 0.90
	}
	if cfg.AcceptBelow <= 0 {
		cfg.AcceptBelow = 0.80
	}
	if cfg.AcceptBelow >= cfg.RefuseAbove || cfg.RefuseAbove > 1 {
		return nil, fmt.Errorf("memory guard: want 0 < accept_below (%v) < refuse_above (%v) <= 1", cfg.AcceptBelow, cfg.RefuseAbove)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Read == nil {
		cfg.Read = ResidentBytes
	}
	if cfg.Limit == 0 {
		l, err := DetectMemoryLimit()
		if err != nil {
			return nil, err
		}
		cfg.Limit = l
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Memory{cfg: cfg, log: log, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Far below its refusal threshold the guard samples less often: the spacing is the time the
// process would take to reach the threshold growing by growthBound a second, between Interval
// and maxSpacing times Interval (2 s by default, on a machine or a cgroup with at least 2 GiB
// left). Near the threshold, and while refusing, it samples every Interval. An idle node so
// wakes less often (its samples were half of what an idle node spent: docs/benchmarks-archive.md,
// "Idle wake-ups"), and a process growing by less than growthBound a second cannot cross the
// threshold unseen between two samples.
const (
	growthBound = 1 << 30 // bytes a second
	maxSpacing  = 8
)

// Start samples memory until Close, spaced by next.
func (m *Memory) Start() {
	m.started.Store(true)
	m.sample()
	go func() {
		defer close(m.done)
		t := time.NewTimer(m.next())
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.sample()
				t.Reset(m.next())
			case <-m.stop:
				return
			}
		}
	}()
}

// next is the wait before the next sample, after the last one (Used).
func (m *Memory) next() time.Duration {
	base := m.cfg.Interval
	refuse := m.cfg.RefuseAbove * float64(m.cfg.Limit)
	used := float64(m.used.Load())
	if m.refusing.Load() || used >= refuse {
		return base
	}
	d := time.Duration((refuse - used) / growthBound * float64(time.Second))
	return min(max(d, base), maxSpacing*base)
}

// Close stops sampling; it is idempotent.
func (m *Memory) Close() {
	m.once.Do(func() { close(m.stop) })
	if m.started.Load() {
		<-m.done
	}
}

func (m *Memory) sample() {
	used, err := m.cfg.Read()
	if err != nil {
		return
	}
	m.Observe(used)
}

// Observe applies one reading: above the refuse threshold the guard starts refusing, below
// the accept threshold it stops; in between it keeps its state.
func (m *Memory) Observe(used uint64) {
	m.used.Store(used)
	frac := float64(used) / float64(m.cfg.Limit)
	switch {
	case frac > m.cfg.RefuseAbove && !m.refusing.Load():
		m.refusing.Store(true)
		m.trips.Add(1)
		m.log.Warn("memory guard: refusing new connections", "used_bytes", used, "limit_bytes", m.cfg.Limit,
			"refuse_above", m.cfg.RefuseAbove, "accept_below", m.cfg.AcceptBelow)
	case frac < m.cfg.AcceptBelow && m.refusing.Load():
		m.refusing.Store(false)
		m.log.Info("memory guard: accepting connections again", "used_bytes", used, "limit_bytes", m.cfg.Limit)
	}
}

// Refusing reports whether new connections are refused.
func (m *Memory) Refusing() bool { return m != nil && m.refusing.Load() }

// Used is the last reading, in bytes.
func (m *Memory) Used() uint64 { return m.used.Load() }

// Limit is the limit the fractions apply to, in bytes.
func (m *Memory) Limit() uint64 { return m.cfg.Limit }

// Trips counts how often the guard started refusing.
func (m *Memory) Trips() int64 { return m.trips.Load() }
