package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
)

func TestProgressFormat(t *testing.T) {
	pt := &Point{Second: 65, Connections: 19000, Attempts: 19003, Failed: 3, Delivered: 12345, P50Ms: 20, P99Ms: 56.3, MaxMs: 80}
	server := &ServerMetrics{Connections: 18999, RSSBytes: 45.5 * (1 << 20)}
	for _, c := range []struct {
		elapsed time.Duration
		pt      *Point
		server  *ServerMetrics
		want    string
	}{
		{0, nil, nil, "00:00  starting"},
		{65*time.Second + 900*time.Millisecond, pt, nil, "01:05  conns 19,000 (3 failed)  events/s 12,345  p99 56.3 ms"},
		{65 * time.Second, pt, server, "01:05  conns 19,000 (3 failed)  events/s 12,345  p99 56.3 ms  | server conns 18,999, RSS 45.5 MiB"},
		{3 * time.Second, &Point{Connections: 7}, nil, "00:03  conns 7  events/s 0  p99 -"},
		{4 * time.Second, &Point{Second: 4}, server, "00:04  no client activity yet  | server conns 18,999, RSS 45.5 MiB"},
		{61 * time.Minute, &Point{Connections: 1, Delivered: 1, P99Ms: 1234.4}, server, "61:00  conns 1  events/s 1  p99 1234 ms  | server conns 18,999, RSS 45.5 MiB"},
		{time.Second, &Point{Connections: 1, Delivered: 1, P99Ms: 0.123}, nil, "00:01  conns 1  events/s 1  p99 0.12 ms"},
	} {
		if got := FormatProgress(c.elapsed, c.pt, c.server); got != c.want {
			t.Errorf("FormatProgress(%v, %+v, %+v)\n got %q\nwant %q", c.elapsed, c.pt, c.server, got, c.want)
		}
	}
}

func TestProgressThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 19000: "19,000", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := fmtThousands(n); got != want {
			t.Errorf("fmtThousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// lineBuffer is a bytes.Buffer the progress goroutine and the test may share.
type lineBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lineBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lineBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// elapsedPrefix matches the elapsed time that starts a progress frame: a test cannot know it,
// as a busy machine may draw a frame seconds after Start.
var elapsedPrefix = regexp.MustCompile(`^\d\d:\d\d  `)

func TestProgressRunner(t *testing.T) {
	tl := NewTimeline()
	for range 3 {
		tl.Attempt()
		tl.Connected(1)
	}
	tl.Delivered(int64(5 * time.Millisecond))
	tl.sample() // one second's point, without waiting a second

	var out lineBuffer
	p := NewProgress(&out, ProgressConfig{
		Timeline: tl,
		Server:   func() (ServerMetrics, bool) { return ServerMetrics{Connections: 3, RSSBytes: 1 << 20}, true },
		Interval: 2 * time.Millisecond,
	})
	p.Start()
	p.Start() // a second Start starts nothing
	poll.Until(t, patience, "three frames", func() (bool, string) { s := out.String(); return strings.Count(s, clearLine) >= 3, s })
	p.Stop()
	p.Stop()
	got := out.String()
	frames := strings.Split(got, clearLine)
	if frames[0] != "" || frames[len(frames)-1] != "" {
		t.Fatalf("output %q: want every frame to start with %q and the last write to blank the line", got, clearLine)
	}
	want := "conns 3  events/s 1  p99 5.00 ms  | server conns 3, RSS 1.0 MiB"
	for _, f := range frames[1 : len(frames)-1] {
		if !elapsedPrefix.MatchString(f) || f[len("00:00  "):] != want {
			t.Fatalf("frame %q, want %q after the elapsed time", f, want)
		}
	}
	if n := len(out.String()); n != len(got) {
		t.Fatalf("%d bytes written after Stop", n-len(got))
	}
}

func TestProgressWidth(t *testing.T) {
	var out lineBuffer
	p := NewProgress(&out, ProgressConfig{Interval: time.Hour, Width: 10})
	p.Start()
	poll.Until(t, patience, "the first frame", func() (bool, string) { s := out.String(); return strings.Contains(s, "  st"), s })
	p.Stop()
	got := out.String()
	frame, ok := strings.CutPrefix(got, clearLine)
	frame, ok2 := strings.CutSuffix(frame, clearLine)
	if !ok || !ok2 || !elapsedPrefix.MatchString(frame) || len(frame) != 9 || !strings.HasSuffix(frame, "  st") {
		t.Fatalf("output %q, want %q: the line cut to width-1 columns", got, clearLine+"00:00  st"+clearLine)
	}
}

func TestProgressStopWithoutStart(t *testing.T) {
	var out lineBuffer
	p := NewProgress(&out, ProgressConfig{Interval: time.Millisecond})
	p.Stop()
	p.Start() // after Stop: starts nothing
	p.Stop()
	if out.String() != "" {
		t.Fatalf("a progress line never started wrote %q", out.String())
	}
}

func TestProgressTerminalWidth(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, ok := TerminalWidth(w); ok {
		t.Error("a pipe is reported as a terminal")
	}
	if out, _ := Terminal(w); out != nil {
		t.Error("Terminal(pipe) returned a writer")
	}
	if out, _ := Terminal(&bytes.Buffer{}); out != nil {
		t.Error("Terminal(buffer) returned a writer")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if _, ok := TerminalWidth(null); ok {
		t.Error("/dev/null is reported as a terminal")
	}
}

// fakeMetrics serves a Prometheus page. Its connection count grows by 10 a scrape; once
// draining it falls by 2 a scrape to zero instead.
type fakeMetrics struct {
	mu       sync.Mutex
	conns    int
	draining bool
}

func (f *fakeMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(w, "# TYPE herald_connected gauge\nherald_connected{app_id=\"app-id\"} %d\nherald_channels 2\ngo_goroutines 9\nprocess_resident_memory_bytes 2.097152e+06\nprocess_cpu_seconds_total 1.5\n", f.conns)
	if f.draining {
		f.conns = max(f.conns-2, 0)
	} else {
		f.conns += 10
	}
}

func (f *fakeMetrics) drain(from int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns, f.draining = from, true
}

func TestReportMonitorMetrics(t *testing.T) {
	fake := &fakeMetrics{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var out lineBuffer
	m, err := StartMonitor(t.Context(), MonitorConfig{Progress: &out, MetricsURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if m.Server() != nil {
		t.Error("server samples before Stop")
	}
	m.Timeline().Connected(1)
	poll.Until(t, patience, "a background sample", func() (bool, string) { _, ok := m.sampler.Latest(); return ok, "no sample" })
	poll.Until(t, patience, "the progress line to show the server", func() (bool, string) { s := out.String(); return strings.Contains(s, "| server conns"), s })
	m.sampler.Stop() // no more background scrapes: the fake's state is the test's
	fake.drain(5)
	m.settle = patience // the after sample must see the drain to 0, however slow the scrapes
	m.Stop(t.Context())
	m.Stop(t.Context())
	if !strings.HasSuffix(out.String(), clearLine) {
		t.Errorf("progress output %q does not end by blanking the line", out.String())
	}
	s := m.Server()
	if s == nil || s.After == nil {
		t.Fatalf("server samples %+v: want before and after", s)
	}
	if s.URL != srv.URL || s.Before.Connections != 0 || s.Before.Channels != 2 || s.Before.Goroutines != 9 || s.Before.RSSBytes != 2<<20 || s.Before.CPUSeconds != 1.5 {
		t.Errorf("before %+v from %s", s.Before, s.URL)
	}
	if s.After.Connections != 0 || s.AfterSeconds < 2*afterPoll.Seconds() || len(s.Series) == 0 {
		t.Errorf("after %+v, %.2f s after the run, %d background samples: want 0 connections read on the third scrape (5, 3, 1, 0), after at least one background sample",
			s.After, s.AfterSeconds, len(s.Series))
	}

	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server metrics from " + srv.URL, "before", "after", "change", "connections", "2.0 MiB", "1.50 s", "+0.00 s"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	page := m.HTMLReport(map[string]any{"scenario": "test"}, nil)
	if page.Server != s || page.Started.IsZero() || page.Duration <= 0 || len(page.Timeline) == 0 {
		t.Errorf("HTML report %+v: want the samples, the start, the duration and the timeline", page)
	}
}

func TestReportMetricsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := StartMonitor(t.Context(), MonitorConfig{MetricsURL: srv.URL}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("StartMonitor with a metrics URL that answers 404: err %v", err)
	}
}

func TestReportWithServerMetrics(t *testing.T) {
	s := &ServerSamples{URL: "http://127.0.0.1:9100/metrics", Before: ServerMetrics{Connections: 1}, After: &ServerMetrics{Connections: 2},
		Series: []ServerPoint{{Second: 1}}}
	got, err := WithServerMetrics(struct {
		Scenario string `json:"scenario"`
	}{"fanout"}, s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"scenario":"fanout","server_metrics":{"url":"http://127.0.0.1:9100/metrics","before":{"connections":1,"channels":0,"goroutines":0,"rss_bytes":0,"cpu_seconds":0},"after":{"connections":2,"channels":0,"goroutines":0,"rss_bytes":0,"cpu_seconds":0},"after_seconds":0}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got, err := WithServerMetrics(struct{}{}, s); err != nil || !strings.HasPrefix(string(got), `{"server_metrics":{`) {
		t.Fatalf("empty report: %s, %v", got, err)
	}
	if _, err := WithServerMetrics([]int{1}, s); err == nil {
		t.Fatal("a report that is not an object: no error")
	}
}
