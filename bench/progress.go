package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProgressConfig configures a Progress line. The zero value of each field means its default.
type ProgressConfig struct {
	Timeline *Timeline                    // the run's timeline; nil shows the elapsed time only
	Server   func() (ServerMetrics, bool) // the server's latest metrics; nil: not shown
	Interval time.Duration                // between rewrites; default 1s
	Width    int                          // terminal columns; the line is cut to fit; 0: not cut
}

// Progress rewrites one status line in place while a run goes on: elapsed time, open
// connections, events delivered in the last second, that second's P99 and, with a Server
// source, what the server says of itself. It writes terminal control sequences, so it is for a
// terminal only (see TerminalWidth). Start starts its goroutine; Stop stops it and blanks the
// line, so whatever is printed next starts on a clean line.
type Progress struct {
	w   io.Writer
	cfg ProgressConfig

	start time.Time
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once // guards stop
	begun sync.Once // guards the goroutine's start
}

// NewProgress returns a progress line that writes to w once started.
func NewProgress(w io.Writer, cfg ProgressConfig) *Progress {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	return &Progress{w: w, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start draws the line now and then every Interval until Stop. Only the first call starts.
func (p *Progress) Start() {
	p.begun.Do(func() {
		p.start = time.Now()
		go p.loop()
	})
}

func (p *Progress) loop() {
	defer close(p.done)
	p.draw()
	// Redraw a tenth of an interval after each of the timeline's samples (it started with us),
	// not at the same instant, where the line would race the sample and show the second before.
	phase := time.NewTimer(p.cfg.Interval / 10)
	select {
	case <-phase.C:
	case <-p.stop:
		phase.Stop()
		io.WriteString(p.w, clearLine)
		return
	}
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.draw()
		case <-p.stop:
			io.WriteString(p.w, clearLine)
			return
		}
	}
}

// Stop ends the line's goroutine and blanks the line. It is idempotent and safe without Start.
func (p *Progress) Stop() {
	p.once.Do(func() { close(p.stop) })
	p.begun.Do(func() { close(p.done) }) // never started: nothing to wait for, and no start later
	<-p.done
}

// clearLine returns the cursor to the start of the line and erases it (VT100, which every
// terminal in use understands).
const clearLine = "\r\x1b[2K"

func (p *Progress) draw() {
	var last *Point
	if tl := p.cfg.Timeline; tl != nil {
		if pt, ok := tl.Last(); ok {
			last = &pt
		}
	}
	var server *ServerMetrics
	if p.cfg.Server != nil {
		if m, ok := p.cfg.Server(); ok {
			server = &m
		}
	}
	line := FormatProgress(time.Since(p.start), last, server)
	if w := p.cfg.Width; w > 1 && len(line) >= w {
		line = line[:w-1] // ASCII only, so bytes are columns; the last column would wrap
	}
	io.WriteString(p.w, clearLine+line)
}

// FormatProgress renders one progress line: elapsed time, then what the last second of the
// timeline says (nil: nothing yet), then the server's own figures (nil: not known). The line is
// plain ASCII, without control sequences.
func FormatProgress(elapsed time.Duration, last *Point, server *ServerMetrics) string {
	var b strings.Builder
	s := int64(elapsed / time.Second)
	fmt.Fprintf(&b, "%02d:%02d", s/60, s%60)
	switch {
	case last == nil:
		b.WriteString("  starting")
	case last.Attempts == 0 && last.Connections == 0 && last.Delivered == 0:
		b.WriteString("  no client activity yet")
	default:
		fmt.Fprintf(&b, "  conns %s", fmtThousands(last.Connections))
		if last.Failed > 0 {
			fmt.Fprintf(&b, " (%s failed)", fmtThousands(last.Failed))
		}
		fmt.Fprintf(&b, "  events/s %s", fmtThousands(last.Delivered))
		if last.Delivered > 0 {
			fmt.Fprintf(&b, "  p99 %s ms", fmtLatencyMs(last.P99Ms))
		} else {
			b.WriteString("  p99 -")
		}
	}
	if server != nil {
		fmt.Fprintf(&b, "  | server conns %s, RSS %.1f MiB", fmtThousands(int64(server.Connections)), server.RSSBytes/(1<<20))
	}
	return b.String()
}

// fmtLatencyMs formats a latency in milliseconds with three significant figures at most.
func fmtLatencyMs(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// fmtThousands writes n with a comma between groups of three digits: 19,000.
func fmtThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
