package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// metricsTimeout bounds one scrape, so a stalled metrics endpoint cannot hold a run or the
// progress line.
const metricsTimeout = 2 * time.Second

// MetricsSampler reads a server's Prometheus endpoint (herald's metrics port, Soketi's and
// Sockudo's on 9601), or a cluster's, one per node, summing them: once on demand with Sample
// and, between Start and Stop, once a second in the background, keeping every sample. It is
// safe for concurrent use.
type MetricsSampler struct {
	urls   []string
	prefix string
	client *http.Client

	mu     sync.Mutex // guards series
	series []ServerPoint

	start  time.Time
	ctx    context.Context // cancelled by Stop; bounds background scrapes
	cancel context.CancelFunc
	done   chan struct{}
	begun  sync.Once // guards the goroutine's start
}

// ServerPoint is one background sample of a server's metrics.
type ServerPoint struct {
	Second float64 `json:"t"` // seconds since the sampler started
	ServerMetrics
}

// NewMetricsSampler returns a sampler of url, or of several comma-separated URLs (one per
// node), whose connection and channel series are named prefix+"connected" and
// prefix+"channels" (herald: "herald_").
func NewMetricsSampler(url, prefix string) *MetricsSampler {
	ctx, cancel := context.WithCancel(context.Background())
	var urls []string
	for _, u := range strings.Split(url, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return &MetricsSampler{urls: urls, prefix: prefix, client: &http.Client{Timeout: metricsTimeout},
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// URL is the endpoint the sampler reads; several are comma-separated.
func (s *MetricsSampler) URL() string { return strings.Join(s.urls, ", ") }

// Sample reads every endpoint once, at the same time, and sums what they say.
func (s *MetricsSampler) Sample(ctx context.Context) (ServerMetrics, error) {
	if len(s.urls) == 1 {
		return scrapeMetrics(ctx, s.client, s.urls[0], s.prefix)
	}
	got := make([]ServerMetrics, len(s.urls))
	errs := make([]error, len(s.urls))
	var wg sync.WaitGroup
	for k, u := range s.urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[k], errs[k] = scrapeMetrics(ctx, s.client, u, s.prefix)
		}()
	}
	wg.Wait()
	var sum ServerMetrics
	for k, m := range got {
		if errs[k] != nil {
			return ServerMetrics{}, errs[k]
		}
		sum.Connections += m.Connections
		sum.Channels += m.Channels
		sum.Goroutines += m.Goroutines
		sum.RSSBytes += m.RSSBytes
		sum.CPUSeconds += m.CPUSeconds
	}
	return sum, nil
}

// Start samples once a second until Stop. Only the first call starts.
func (s *MetricsSampler) Start() {
	s.begun.Do(func() {
		s.start = time.Now()
		go s.loop()
	})
}

func (s *MetricsSampler) loop() {
	defer close(s.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			m, err := s.Sample(s.ctx)
			if err != nil {
				continue // a missed second; the before/after samples report errors
			}
			s.mu.Lock()
			s.series = append(s.series, ServerPoint{Second: time.Since(s.start).Seconds(), ServerMetrics: m})
			s.mu.Unlock()
		case <-s.ctx.Done():
			return
		}
	}
}

// Stop ends background sampling. It is idempotent and safe without Start.
func (s *MetricsSampler) Stop() {
	s.cancel()
	s.begun.Do(func() { close(s.done) })
	<-s.done
}

// Latest returns the most recent background sample, and false before the first one.
func (s *MetricsSampler) Latest() (ServerMetrics, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.series) == 0 {
		return ServerMetrics{}, false
	}
	return s.series[len(s.series)-1].ServerMetrics, true
}

// Series returns a copy of every background sample so far.
func (s *MetricsSampler) Series() []ServerPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ServerPoint(nil), s.series...)
}

// ServerSamples is what a server's metrics endpoint said before and after a run.
type ServerSamples struct {
	URL    string        `json:"url"` // several, one per node, are comma-separated: their figures are summed
	Before ServerMetrics `json:"before"`
	// After is read once the server reports no more connections than Before (it has closed
	// the run's), or 3 s after the run if it does not get there; nil when the scrape failed.
	After        *ServerMetrics `json:"after,omitempty"`
	AfterSeconds float64        `json:"after_seconds"`         // how long after the run After was read
	AfterError   string         `json:"after_error,omitempty"` // why the scrape failed
	// Series is the once-a-second samples taken during the run, plotted by the HTML report.
	Series []ServerPoint `json:"-"`
}

// WriteText writes the samples as a block that follows a scenario's text report.
func (s *ServerSamples) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "  server metrics from %s", s.URL)
	if s.After != nil {
		fmt.Fprintf(b, "; after: %.1f s after the run", s.AfterSeconds)
	}
	fmt.Fprintln(b)
	if s.After == nil {
		fmt.Fprintf(b, "               after the run: %s\n", s.AfterError)
	}
	fmt.Fprintf(b, "  %-14s %14s %14s %14s\n", "", "before", "after", "change")
	for _, r := range s.rows() {
		fmt.Fprintf(b, "  %-14s %14s %14s %14s\n", r.name, r.before, r.after, r.change)
	}
	return b.Flush()
}

type samplesRow struct{ name, before, after, change string }

// rows are the samples as text, for the text and HTML reports.
func (s *ServerSamples) rows() []samplesRow {
	type field struct {
		name string
		get  func(ServerMetrics) float64
		f    func(float64) string
	}
	count := func(v float64) string { return fmtThousands(int64(math.Round(v))) }
	fields := []field{
		{"connections", func(m ServerMetrics) float64 { return m.Connections }, count},
		{"channels", func(m ServerMetrics) float64 { return m.Channels }, count},
		{"goroutines", func(m ServerMetrics) float64 { return m.Goroutines }, count},
		{"RSS", func(m ServerMetrics) float64 { return m.RSSBytes }, func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }},
		{"CPU seconds", func(m ServerMetrics) float64 { return m.CPUSeconds }, func(v float64) string { return fmt.Sprintf("%.2f s", v) }},
	}
	rows := make([]samplesRow, 0, len(fields))
	for _, f := range fields {
		r := samplesRow{name: f.name, before: f.f(f.get(s.Before)), after: "-", change: "-"}
		if s.After != nil {
			r.after = f.f(f.get(*s.After))
			d := f.get(*s.After) - f.get(s.Before)
			r.change = f.f(d)
			if d >= 0 {
				r.change = "+" + r.change
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// WithServerMetrics returns report's JSON object with one more member, "server_metrics": s.
// The scenario's own members are unchanged, so a reader of the plain report reads this too.
func WithServerMetrics(report any, s *ServerSamples) (json.RawMessage, error) {
	doc, err := json.Marshal(report)
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	doc = bytes.TrimSpace(doc)
	if len(doc) < 2 || doc[0] != '{' || doc[len(doc)-1] != '}' {
		return nil, fmt.Errorf("add server metrics: the report is not a JSON object")
	}
	out := append([]byte(nil), doc[:len(doc)-1]...)
	if len(doc) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"server_metrics":`...)
	out = append(out, extra...)
	return append(out, '}'), nil
}
