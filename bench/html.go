package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// HTMLReport is what WriteHTML renders: one run of one scenario. The zero value of each field
// means it is not shown.
type HTMLReport struct {
	Command  []string      // the command line, a word per element
	Version  string        // herald's version
	Started  time.Time     // when the run started
	Duration time.Duration // how long it ran
	// Report is the scenario's report. It is rendered from its JSON encoding, member by member,
	// so any scenario's report struct works; its "timeline" member is plotted, not tabled.
	Report any
	Error  string // why the run failed, when it did
	// Timeline is the run's per-second record; nil means the report's "timeline" member.
	Timeline []Point
	Server   *ServerSamples // the server's own metrics; nil when not sampled
}

// WriteHTMLFile writes the report to a new file at path (replacing any file there).
func WriteHTMLFile(path string, r HTMLReport) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	if err := WriteHTML(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	return nil
}

// WriteHTML writes the report as one self-contained HTML page: inline CSS and inline SVG
// plots, no scripts, nothing fetched from anywhere (its Content-Security-Policy forbids it).
// The page is also well-formed XML.
func WriteHTML(w io.Writer, r HTMLReport) error {
	var doc *jsonValue
	if r.Report != nil {
		data, err := json.Marshal(r.Report)
		if err != nil {
			return fmt.Errorf("write HTML report: %w", err)
		}
		if doc, err = parseJSON(data); err != nil {
			return fmt.Errorf("write HTML report: %w", err)
		}
	}
	points := r.Timeline
	if points == nil {
		if tl := doc.member("timeline"); tl != nil && tl.kind == 'a' {
			if err := json.Unmarshal([]byte(compactJSON(tl)), &points); err != nil {
				return fmt.Errorf("write HTML report: timeline: %w", err)
			}
		}
	}

	title := "herald-bench"
	if s := doc.member("scenario"); s != nil && s.kind == 's' {
		title += " " + s.text
	}
	esc := html.EscapeString
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	b.WriteString(`<meta name="viewport" content="width=device-width, initial-scale=1"/>` + "\n")
	b.WriteString(`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'"/>` + "\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", esc(pageTitle(title, r.Started)), htmlCSS)

	fmt.Fprintf(&b, "<header>\n<h1>%s</h1>\n", esc(title))
	if r.Error != "" {
		fmt.Fprintf(&b, "<p class=\"error\">The run failed: %s</p>\n", esc(r.Error))
	}
	writeMeta(&b, r, doc)
	b.WriteString("</header>\n<main>\n")

	b.WriteString("<section id=\"over-time\">\n<h2>Over time</h2>\n")
	switch {
	case len(points) == 0:
		b.WriteString(`<p class="empty">No per-second timeline was recorded for this run: the scenario did not record one, or the run ended within its first second. The summary below has the run's figures.</p>` + "\n")
	case !timelineActive(points):
		fmt.Fprintf(&b, `<p class="empty">The per-second timeline (%d seconds) recorded no connection attempt and no event. The summary below has the run's figures.</p>`+"\n", len(points))
	default:
		var series []ServerPoint
		if r.Server != nil {
			series = r.Server.Series
		}
		for _, p := range timelinePlots(points, series) {
			fmt.Fprintf(&b, "<figure>\n<figcaption>%s</figcaption>\n", esc(p.title))
			p.writeSVG(&b)
			b.WriteString("</figure>\n")
		}
	}
	b.WriteString("</section>\n")

	if r.Server != nil {
		writeServerSamples(&b, r.Server)
	}
	b.WriteString("<section id=\"summary\">\n<h2>Summary</h2>\n")
	if doc == nil {
		b.WriteString(`<p class="empty">The scenario produced no report.</p>` + "\n")
	} else {
		writeSummary(&b, doc)
	}
	b.WriteString("</section>\n")
	if timelineActive(points) {
		writePointsTable(&b, points)
	}
	b.WriteString("</main>\n<footer>Written by herald-bench. Self-contained: no scripts, nothing loaded from the network.</footer>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	return nil
}

func pageTitle(title string, started time.Time) string {
	if started.IsZero() {
		return title
	}
	return title + ", " + started.Format("2006-01-02 15:04")
}

// writeMeta writes what was run, when, against what, and from where.
func writeMeta(b *strings.Builder, r HTMLReport, doc *jsonValue) {
	esc := html.EscapeString
	b.WriteString("<dl class=\"meta\">\n")
	if len(r.Command) > 0 {
		fmt.Fprintf(b, "<dt>command</dt><dd><code>%s</code></dd>\n", esc(shellQuote(r.Command)))
	}
	if !r.Started.IsZero() {
		fmt.Fprintf(b, "<dt>date</dt><dd>%s", esc(r.Started.Format("2006-01-02 15:04:05 MST")))
		if r.Duration > 0 {
			fmt.Fprintf(b, ", ran %.1f s", r.Duration.Seconds())
		}
		b.WriteString("</dd>\n")
	}
	if s := doc.member("server"); s != nil && s.kind == 'o' {
		var parts []string
		cluster := s.member("nodes") != nil // its nodes say what "ws" lists
		for i, k := range s.keys {
			v := s.vals[i]
			switch {
			case k == "ws" && cluster:
			case v.scalar() && v.text != "":
				parts = append(parts, fmt.Sprintf(`<span class="k">%s</span> %s`, esc(k), esc(v.text)))
			case v.kind == 'a' && len(v.vals) > 0 && !v.objects():
				var items []string
				for _, e := range v.vals {
					if e.scalar() {
						items = append(items, esc(e.text))
					}
				}
				parts = append(parts, fmt.Sprintf(`<span class="k">%s</span> %s`, esc(k), strings.Join(items, ", ")))
			}
		}
		fmt.Fprintf(b, "<dt>server</dt><dd>%s</dd>\n", strings.Join(parts, " · "))
	}
	if r.Server != nil {
		fmt.Fprintf(b, "<dt>metrics</dt><dd>%s</dd>\n", esc(r.Server.URL))
	}
	host, _ := os.Hostname()
	gen := fmt.Sprintf("%s %s/%s, %d CPUs", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if r.Version != "" {
		gen = "herald-bench " + r.Version + ", " + gen
	}
	if host != "" {
		gen += ", host " + host
	}
	fmt.Fprintf(b, "<dt>generator</dt><dd>%s</dd>\n</dl>\n", esc(gen))
}

// shellQuote joins words into a command line a POSIX shell reads back the same.
func shellQuote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,@+%") == "" {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// writeServerSamples writes the server's metrics before and after the run.
func writeServerSamples(b *strings.Builder, s *ServerSamples) {
	esc := html.EscapeString
	fmt.Fprintf(b, "<section id=\"server-metrics\">\n<h2>Server metrics</h2>\n<p>From <code>%s</code>, before the first connection and ", esc(s.URL))
	if s.After == nil {
		fmt.Fprintf(b, "after the run, when the scrape failed: %s", esc(s.AfterError))
	} else {
		fmt.Fprintf(b, "%.1f s after the run (once the server's connections were back to their count before it, or 3 s at most).", s.AfterSeconds)
	}
	b.WriteString("</p>\n<table class=\"rows\" data-table=\"server-metrics\"><thead><tr><th></th><th>before</th><th>after</th><th>change</th></tr></thead><tbody>\n")
	for _, r := range s.rows() {
		fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(r.name), esc(r.before), esc(r.after), esc(r.change))
	}
	b.WriteString("</tbody></table>\n</section>\n")
}

// writePointsTable writes the timeline itself, folded away.
func writePointsTable(b *strings.Builder, points []Point) {
	fmt.Fprintf(b, "<section id=\"per-second\">\n<details>\n<summary>Per-second data (%d points)</summary>\n", len(points))
	b.WriteString(`<table class="rows" data-table="timeline"><thead><tr><th>t (s)</th><th>connections</th><th>attempts</th><th>failed</th><th>delivered</th><th>P50 (ms)</th><th>P99 (ms)</th><th>max (ms)</th></tr></thead><tbody>` + "\n")
	for _, p := range points {
		lat := "<td>–</td><td>–</td><td>–</td>" // no events, no latency
		if p.Delivered > 0 {
			lat = "<td>" + fmtValue(p.P50Ms) + "</td><td>" + fmtValue(p.P99Ms) + "</td><td>" + fmtValue(p.MaxMs) + "</td>"
		}
		fmt.Fprintf(b, "<tr><td>%.2f</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td>%s</tr>\n",
			p.Second, p.Connections, p.Attempts, p.Failed, p.Delivered, lat)
	}
	b.WriteString("</tbody></table>\n</details>\n</section>\n")
}
