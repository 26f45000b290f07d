package bench

import (
	"context"
	"io"
	"os"
	"sync"
	"time"
)

// MonitorConfig configures a Monitor. The zero value records the timeline and nothing else.
type MonitorConfig struct {
	Progress io.Writer // where the live progress line is drawn, a terminal; nil: no line
	Width    int       // the terminal's columns; 0: unknown
	// MetricsURL is the server's Prometheus endpoint, or one per node comma-separated (their
	// figures are summed), read before and after the run and once a second during it; ""
	// means it is not read.
	MetricsURL    string
	MetricsPrefix string // prefix of its connected and channels series; default "herald_"
}

// Monitor watches a run from outside its scenario. It owns the run's Timeline (which the
// scenario records into through Target.Timeline), the live progress line and the server
// metrics sampler: StartMonitor starts all three and Stop stops them.
type Monitor struct {
	started  time.Time
	timeline *Timeline
	progress *Progress
	sampler  *MetricsSampler
	before   ServerMetrics
	settle   time.Duration // afterSettle; a test waits longer

	once     sync.Once // guards the rest
	duration time.Duration
	samples  *ServerSamples
}

// StartMonitor reads the server's metrics once (an unreachable metrics URL fails here, before
// any load), then starts the timeline, the background sampler and the progress line.
func StartMonitor(ctx context.Context, cfg MonitorConfig) (*Monitor, error) {
	m := &Monitor{settle: afterSettle}
	if cfg.MetricsURL != "" {
		if cfg.MetricsPrefix == "" {
			cfg.MetricsPrefix = "herald_"
		}
		if _, err := parseMetricsURLs(cfg.MetricsURL); err != nil {
			return nil, err
		}
		m.sampler = NewMetricsSampler(cfg.MetricsURL, cfg.MetricsPrefix)
		before, err := m.sampler.Sample(ctx)
		if err != nil {
			return nil, err
		}
		m.before = before
	}
	m.started = time.Now()
	m.timeline = NewTimeline()
	m.timeline.Start()
	pc := ProgressConfig{Timeline: m.timeline, Width: cfg.Width}
	if m.sampler != nil {
		m.sampler.Start()
		pc.Server = m.sampler.Latest
	}
	if cfg.Progress != nil {
		m.progress = NewProgress(cfg.Progress, pc)
		m.progress.Start()
	}
	return m, nil
}

// Timeline is the run's timeline, for Target.Timeline.
func (m *Monitor) Timeline() *Timeline { return m.timeline }

// Stop blanks and stops the progress line, takes the timeline's last point, stops the sampler
// and reads the server's metrics once more. It is idempotent.
func (m *Monitor) Stop(ctx context.Context) {
	m.once.Do(func() {
		if m.progress != nil {
			m.progress.Stop()
		}
		m.timeline.Stop()
		m.duration = time.Since(m.started)
		if m.sampler == nil {
			return
		}
		m.sampler.Stop()
		m.samples = m.after(ctx)
	})
}

// afterSettle is how long the sample after the run waits for the server to finish closing
// the run's connections, polling every afterPoll.
const (
	afterSettle = 3 * time.Second
	afterPoll   = 100 * time.Millisecond
)

// after takes the sample after the run: once the server reports no more connections than
// before it, or afterSettle after the run, whichever comes first.
func (m *Monitor) after(ctx context.Context) *ServerSamples {
	s := &ServerSamples{URL: m.sampler.URL(), Before: m.before, Series: m.sampler.Series()}
	end := time.Now()
	for {
		a, err := m.sampler.Sample(ctx)
		if err != nil {
			s.AfterError = err.Error()
			return s
		}
		s.After, s.AfterSeconds = &a, time.Since(end).Seconds()
		if a.Connections <= m.before.Connections || time.Since(end) >= m.settle {
			return s
		}
		t := time.NewTimer(afterPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return s
		}
	}
}

// Server is what the server's metrics said before and after the run: nil without a metrics
// URL or before Stop.
func (m *Monitor) Server() *ServerSamples { return m.samples }

// HTMLReport returns the HTML report of the run that produced report (nil when it failed with
// runErr). Call it after Stop; the caller adds Command and Version.
func (m *Monitor) HTMLReport(report any, runErr error) HTMLReport {
	r := HTMLReport{Started: m.started, Duration: m.duration, Report: report, Timeline: m.timeline.Points(), Server: m.samples}
	if r.Timeline == nil {
		r.Timeline = []Point{}
	}
	if runErr != nil {
		r.Error = runErr.Error()
	}
	return r
}

// Terminal returns w and its width when w is a terminal (an *os.File the kernel says is a tty),
// for MonitorConfig.Progress; otherwise nil.
func Terminal(w io.Writer) (io.Writer, int) {
	f, ok := w.(*os.File)
	if !ok {
		return nil, 0
	}
	cols, ok := TerminalWidth(f)
	if !ok {
		return nil, 0
	}
	return f, cols
}
