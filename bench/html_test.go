package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// xmlNode is an element of the report page, parsed as XML.
type xmlNode struct {
	name string
	attr map[string]string
	kids []*xmlNode // elements and, in order among them, text nodes
	text string     // a text node's character data (name "#text")
}

// parsePage parses the whole page as strict XML: it fails on any unbalanced tag, bad entity
// or stray '<' or '&'.
func parsePage(t *testing.T, page string) *xmlNode {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(page))
	dec.Strict = true
	root := &xmlNode{name: "#document"}
	stack := []*xmlNode{root}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &xmlNode{name: tok.Name.Local, attr: map[string]string{}}
			for _, a := range tok.Attr {
				n.attr[a.Name.Local] = a.Value
			}
			top.kids = append(top.kids, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.kids = append(top.kids, &xmlNode{name: "#text", text: string(tok)})
		}
	}
	if len(stack) != 1 {
		t.Fatalf("%d elements left open", len(stack)-1)
	}
	return root
}

// find returns every element under n, n included, that match.
func (n *xmlNode) find(match func(*xmlNode) bool) []*xmlNode {
	var out []*xmlNode
	if match(n) {
		out = append(out, n)
	}
	for _, k := range n.kids {
		out = append(out, k.find(match)...)
	}
	return out
}

func (n *xmlNode) byAttr(name, key, value string) []*xmlNode {
	return n.find(func(e *xmlNode) bool { return e.name == name && e.attr[key] == value })
}

// allText is the element's text with its descendants', in document order.
func (n *xmlNode) allText() string {
	s := n.text
	for _, k := range n.kids {
		s += k.allText()
	}
	return s
}

// elems are the element children, without text nodes.
func (n *xmlNode) elems() []*xmlNode {
	var out []*xmlNode
	for _, k := range n.kids {
		if k.name != "#text" {
			out = append(out, k)
		}
	}
	return out
}

// one returns the single element that matches, or fails.
func one(t *testing.T, nodes []*xmlNode, what string) *xmlNode {
	t.Helper()
	if len(nodes) != 1 {
		t.Fatalf("%d elements for %s, want 1", len(nodes), what)
	}
	return nodes[0]
}

// seriesPoints returns a plot's series as the points of its polylines, one slice per polyline.
func seriesPoints(t *testing.T, page *xmlNode, plotID, seriesID string) [][]string {
	t.Helper()
	svg := one(t, page.byAttr("svg", "data-plot", plotID), "plot "+plotID)
	g := one(t, svg.byAttr("g", "data-series", seriesID), "series "+seriesID+" of "+plotID)
	var lines [][]string
	for _, pl := range g.find(func(e *xmlNode) bool { return e.name == "polyline" }) {
		lines = append(lines, strings.Fields(pl.attr["points"]))
	}
	return lines
}

func countPoints(lines [][]string) int {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return n
}

// testReport stands for any scenario's report: nested objects, an array of objects, a
// timeline member, text that needs escaping.
type testReport struct {
	Scenario string        `json:"scenario"`
	Server   ServerInfo    `json:"server"`
	Subs     int           `json:"subs"`
	Note     string        `json:"note"`
	Complete bool          `json:"complete"`
	Channels []string      `json:"channels"`
	Latency  Latency       `json:"latency"`
	Usage    *Usage        `json:"server_usage"`
	Deep     any           `json:"deep"`
	PerEvent []EventReport `json:"per_event"`
	Timeline []Point       `json:"timeline,omitempty"`
}

// knownTimeline is ten seconds: connections 100 a second, 1,000 events a second except in
// seconds 4 and 7 (none), P50 10 ms, P99 10 ms times the second, max twice the P99.
func knownTimeline() []Point {
	var pts []Point
	for s := 1; s <= 10; s++ {
		p := Point{Second: float64(s), Connections: int64(100 * s), Attempts: int64(110 * s), Failed: int64(10 * s)}
		if s != 4 && s != 7 {
			p.Delivered, p.P50Ms, p.P99Ms, p.MaxMs = 1000, 10, float64(10*s), float64(20*s)
		}
		pts = append(pts, p)
	}
	return pts
}

func knownReport() *testReport {
	return &testReport{
		Scenario: "fanout",
		Server:   ServerInfo{WS: "ws://127.0.0.1:6001", REST: "http://127.0.0.1:6001", AppID: "app-id", PID: 4242},
		Subs:     19000,
		Note:     `<script>alert("x") & 'y'</script>`,
		Channels: []string{"BTC.trade", "ETH.trade"},
		Latency:  Latency{Count: 95000, MinMs: 1.25, P50Ms: 37.5, P95Ms: 60.125, P99Ms: 68.75, P999Ms: 70, MaxMs: 75.4321},
		Deep:     map[string]any{"a": map[string]any{"b": 7}, "list": []map[string]int{{"x": 1}, {"x": 2}}},
		PerEvent: []EventReport{
			{Seq: 1, PublishMs: 1.5, Latency: Latency{Count: 19000, P99Ms: 66.5}},
			{Seq: 2, PublishMs: 2.25, Latency: Latency{Count: 19000, P99Ms: 67.5}},
			{Seq: 3, PublishMs: 3, Latency: Latency{Count: 19000, P99Ms: 68.5}},
		},
		Timeline: knownTimeline(),
	}
}

func renderPage(t *testing.T, r HTMLReport) (string, *xmlNode) {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String(), parsePage(t, b.String())
}

func TestHTMLPlots(t *testing.T) {
	_, page := renderPage(t, HTMLReport{Report: knownReport()}) // the timeline comes from the report's JSON

	// Latency: the axis runs 0-10 s (800 units from x=64) and 0-200 ms (200 units up from
	// y=236). Seconds 4 and 7 had no events: each series breaks there into three lines.
	for _, c := range []struct {
		series string
		fives  string // the point of second 5
	}{{"p50", "464,226"}, {"p99", "464,186"}, {"max", "464,136"}} {
		lines := seriesPoints(t, page, "latency", c.series)
		if len(lines) != 3 || countPoints(lines) != 8 {
			t.Errorf("latency %s: %d lines, %d points; want 3 lines, 8 points: %v", c.series, len(lines), countPoints(lines), lines)
			continue
		}
		if lines[1][0] != c.fives {
			t.Errorf("latency %s at 5 s: %s, want %s", c.series, lines[1][0], c.fives)
		}
	}
	p99 := seriesPoints(t, page, "latency", "p99")
	if got := strings.Join(p99[0], " "); got != "144,226 224,216 304,206" {
		t.Errorf("p99 seconds 1-3: %s", got)
	}
	if got := p99[2][2]; got != "864,136" { // 100 ms at 10 s: the right end, half way up
		t.Errorf("p99 at 10 s: %s, want 864,136", got)
	}

	// Connections: attempts reach 1,100, so the axis runs to 1,200 in steps of 200.
	for series, want := range map[string]string{"connections": "464,152.7", "attempts": "464,144.3", "failed": "464,227.7"} {
		lines := seriesPoints(t, page, "connections", series)
		if len(lines) != 1 || len(lines[0]) != 10 || lines[0][4] != want {
			t.Errorf("connections %s: %v; want one line of 10 points, %s at 5 s", series, lines, want)
		}
	}
	// Delivered: zero seconds are plotted as zero, not left out.
	d := seriesPoints(t, page, "delivered", "delivered")
	if len(d) != 1 || len(d[0]) != 10 || d[0][3] != "384,236" || d[0][4] != "464,36" {
		t.Errorf("delivered: %v; want 10 points, 0 at 4 s and 1,000 at 5 s", d)
	}

	// Axes have ticks with units and a legend.
	lat := one(t, page.byAttr("svg", "data-plot", "latency"), "latency plot")
	text := lat.allText()
	for _, want := range []string{"latency (ms)", "seconds since start", "P50", "P99", "max", "200", "150", "10"} {
		if !strings.Contains(text, want) {
			t.Errorf("latency plot lacks %q", want)
		}
	}
	conn := one(t, page.byAttr("svg", "data-plot", "connections"), "connections plot").allText()
	for _, want := range []string{"1200", "600", "connections", "failed attempts"} {
		if !strings.Contains(conn, want) {
			t.Errorf("connections plot lacks %q", want)
		}
	}
	// Dots with tooltips, as there are few points.
	tips := lat.find(func(e *xmlNode) bool { return e.name == "circle" })
	if len(tips) != 24 || !strings.Contains(lat.allText(), "P99 at 5 s: 50 ms") {
		t.Errorf("%d dots in the latency plot, want 24 with tooltips like \"P99 at 5 s: 50 ms\"", len(tips))
	}
	if n := len(page.byAttr("svg", "data-plot", "server-rss")); n != 0 {
		t.Errorf("%d server plots without server samples", n)
	}
}

func TestHTMLSummary(t *testing.T) {
	rep := knownReport()
	started := time.Date(2026, 11, 20, 14, 3, 9, 0, time.UTC)
	raw, page := renderPage(t, HTMLReport{
		Command: []string{"herald-bench", "fanout", "--subs", "19000", "--report", "/tmp/my report.html"},
		Version: "v1.2.3", Started: started, Duration: 23456 * time.Millisecond, Report: rep,
	})

	title := one(t, page.find(func(e *xmlNode) bool { return e.name == "h1" }), "h1")
	if title.allText() != "herald-bench fanout" {
		t.Errorf("title %q", title.allText())
	}
	meta := one(t, page.byAttr("dl", "class", "meta"), "the run's description").allText()
	for _, want := range []string{"herald-bench fanout --subs 19000 --report '/tmp/my report.html'", "2026-11-20 14:03:09 UTC, ran 23.5 s",
		"ws ws://127.0.0.1:6001", "rest http://127.0.0.1:6001", "app_id app-id", "pid 4242", "herald-bench v1.2.3, go"} {
		if !strings.Contains(meta, want) {
			t.Errorf("the header lacks %q:\n%s", want, meta)
		}
	}

	cell := func(card, key string) string {
		t.Helper()
		c := one(t, page.byAttr("div", "data-card", card), "card "+card)
		for _, tr := range c.find(func(e *xmlNode) bool { return e.name == "tr" }) {
			if cells := tr.elems(); len(cells) == 2 && cells[0].allText() == key {
				return cells[1].allText()
			}
		}
		t.Errorf("card %s has no row %s", card, key)
		return ""
	}
	for _, c := range []struct{ card, key, want string }{
		{"run", "scenario", "fanout"},
		{"run", "subs", "19000"},
		{"run", "note", `<script>alert("x") & 'y'</script>`}, // escaped in the page, the same text once parsed
		{"run", "complete", "false"},
		{"run", "channels", "BTC.trade, ETH.trade"},
		{"run", "server_usage", "–"},
		{"server", "pid", "4242"},
		{"latency", "count", "95000"},
		{"latency", "p50_ms", "37.5"},
		{"latency", "p95_ms", "60.125"},
		{"latency", "max_ms", "75.432"},
		{"deep", "a.b", "7"},
	} {
		if got := cell(c.card, c.key); got != c.want {
			t.Errorf("card %s, %s = %q, want %q", c.card, c.key, got, c.want)
		}
	}
	if strings.Contains(raw, "<script") {
		t.Error("the report's text reached the page unescaped")
	}

	tbl := one(t, page.byAttr("div", "data-table", "per_event"), "per_event table")
	rows := tbl.find(func(e *xmlNode) bool { return e.name == "tr" })
	if len(rows) != 5 {
		t.Fatalf("per_event table has %d rows, want two head rows and 3", len(rows))
	}
	var groups, cols []string
	for _, h := range rows[0].elems() {
		groups = append(groups, h.attr["colspan"]+":"+h.allText())
	}
	for _, h := range rows[1].elems() {
		cols = append(cols, h.allText())
	}
	if got := strings.Join(groups, " "); got != "1: 1: 7:latency" {
		t.Errorf("per_event column groups %q, want seq and publish_ms alone, then 7 under latency", got)
	}
	if got := strings.Join(cols, " "); got != "seq publish_ms count min_ms p50_ms p95_ms p99_ms p99_9_ms max_ms" {
		t.Errorf("per_event columns %q", got)
	}
	cells := rows[3].elems()
	if got := cells[1].allText() + " " + cells[6].allText(); got != "2.25 67.5" {
		t.Errorf("event 2: publish_ms and p99 %q", got)
	}
	one(t, page.byAttr("div", "data-table", "deep.list"), "the array nested in an object")
	if n := len(page.byAttr("div", "data-card", "timeline")) + len(page.byAttr("div", "data-table", "timeline")); n != 0 {
		t.Error("the timeline is in the summary; it belongs to the plots")
	}
	// The per-second data is there too, folded away.
	if rows := one(t, page.byAttr("table", "data-table", "timeline"), "timeline table").find(func(e *xmlNode) bool { return e.name == "tr" }); len(rows) != 11 {
		t.Errorf("timeline table: %d rows, want a head and 10", len(rows))
	}
}

// TestHTMLSelfContained checks the page loads nothing: no scripts, links, images, CSS URLs,
// and no http(s) address except the server's own, as text.
func TestHTMLSelfContained(t *testing.T) {
	rep := knownReport()
	samples := &ServerSamples{URL: "http://127.0.0.1:9601/metrics", Before: ServerMetrics{RSSBytes: 1 << 20}}
	raw, page := renderPage(t, HTMLReport{Report: rep, Server: samples})
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "<object", "<embed", "src=", "href=", "url(", "@import", "xmlns"} {
		if strings.Contains(strings.ToLower(raw), bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	allowed := []string{rep.Server.REST, samples.URL}
	urls := regexp.MustCompile(`https?://[^\s"'<>·,]*`)
	var walk func(n *xmlNode)
	walk = func(n *xmlNode) {
		for k, v := range n.attr {
			if urls.MatchString(v) {
				t.Errorf("<%s %s=%q>: an address in an attribute", n.name, k, v)
			}
		}
		for _, u := range urls.FindAllString(n.text, -1) {
			ok := false
			for _, a := range allowed {
				ok = ok || u == a
			}
			if !ok {
				t.Errorf("<%s> text has the address %q, which is not the server's", n.name, u)
			}
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(page)
	if !strings.Contains(raw, `content="default-src 'none'; style-src 'unsafe-inline'"`) {
		t.Error("no Content-Security-Policy forbidding loads")
	}
}

func TestHTMLEmptyTimeline(t *testing.T) {
	rep := knownReport()
	rep.Timeline = nil
	raw, page := renderPage(t, HTMLReport{Report: rep})
	if !strings.Contains(raw, "No per-second timeline was recorded") {
		t.Error("no message for the missing timeline")
	}
	if n := len(page.find(func(e *xmlNode) bool { return e.name == "svg" })); n != 0 {
		t.Errorf("%d plots without a timeline", n)
	}
	if cell := one(t, page.byAttr("div", "data-card", "latency"), "latency card").allText(); !strings.Contains(cell, "68.75") {
		t.Error("the summary is missing without a timeline")
	}

	// A timeline of zeros (nothing happened): a message, no plots of nothing.
	raw, page = renderPage(t, HTMLReport{Report: rep, Timeline: []Point{{Second: 1}, {Second: 2}}})
	if !strings.Contains(raw, "recorded no connection attempt and no event") || len(page.find(func(e *xmlNode) bool { return e.name == "svg" })) != 0 {
		t.Error("an all-zero timeline is plotted, or has no message")
	}

	// A failed run: no report at all, only the error and what the timeline holds.
	raw, page = renderPage(t, HTMLReport{Error: "connect: 2 of 50 connections failed", Timeline: knownTimeline()[:2]})
	if !strings.Contains(raw, "The run failed: connect: 2 of 50 connections failed") || !strings.Contains(raw, "The scenario produced no report.") {
		t.Error("a failed run's page lacks the error or the note that there is no report")
	}
	if countPoints(seriesPoints(t, page, "connections", "connections")) != 2 {
		t.Error("a failed run's timeline is not plotted")
	}
	if len(page.byAttr("svg", "data-plot", "latency")) != 1 {
		t.Error("no latency plot when the seconds had no events")
	}
}

func TestHTMLServerSamples(t *testing.T) {
	series := []ServerPoint{
		{Second: 1, ServerMetrics: ServerMetrics{Connections: 10, RSSBytes: 10 << 20, CPUSeconds: 1}},
		{Second: 2, ServerMetrics: ServerMetrics{Connections: 20, RSSBytes: 20 << 20, CPUSeconds: 1.5}},
		{Second: 3, ServerMetrics: ServerMetrics{Connections: 30, RSSBytes: 30 << 20, CPUSeconds: 2.5}},
	}
	samples := &ServerSamples{URL: "http://127.0.0.1:9601/metrics", Before: ServerMetrics{Goroutines: 12, RSSBytes: 8 << 20},
		After: &ServerMetrics{Goroutines: 13, RSSBytes: 30 << 20, CPUSeconds: 2.5}, Series: series}
	_, page := renderPage(t, HTMLReport{Report: knownReport(), Server: samples})
	tbl := one(t, page.byAttr("table", "data-table", "server-metrics"), "server metrics table").allText()
	for _, want := range []string{"goroutines1213+1", "RSS8.0 MiB30.0 MiB+22.0 MiB", "CPU seconds0.00 s2.50 s+2.50 s"} {
		if !strings.Contains(tbl, want) {
			t.Errorf("server metrics table lacks %q: %q", want, tbl)
		}
	}
	if n := countPoints(seriesPoints(t, page, "server-rss", "rss")); n != 3 {
		t.Errorf("RSS plot: %d points, want 3", n)
	}
	// CPU is a rate: none for the first sample, then 50% and 100% of a core.
	cpu := seriesPoints(t, page, "server-cpu", "cpu")
	if countPoints(cpu) != 2 || cpu[0][1] != "304,36" {
		t.Errorf("CPU plot: %v; want 2 points, 100%% at the top at 3 s", cpu)
	}
	if n := countPoints(seriesPoints(t, page, "connections", "server-connections")); n != 3 {
		t.Errorf("server-reported connections: %d points, want 3", n)
	}
}

func TestHTMLDeliveryRate(t *testing.T) {
	// Irregular seconds are divided by their length; a short last interval (the run stopped)
	// joins the one before it.
	x, rate := deliveryRate([]Point{{Second: 1, Delivered: 1000}, {Second: 3, Delivered: 1000}, {Second: 4, Delivered: 600}, {Second: 4.2, Delivered: 100}})
	want := []float64{1000, 500, 700.0 / 1.2}
	if len(x) != 3 || x[0] != 1 || x[1] != 3 || x[2] != 4.2 {
		t.Fatalf("x %v, want 1 3 4.2", x)
	}
	for i := range want {
		if math.Abs(rate[i]-want[i]) > 1e-9 {
			t.Errorf("rate %v, want %v", rate, want)
		}
	}
	// A run shorter than half a second still has its one point.
	if x, rate := deliveryRate([]Point{{Second: 0.3, Delivered: 30}}); len(x) != 1 || math.Abs(rate[0]-100) > 1e-9 {
		t.Errorf("one short point: %v %v", x, rate)
	}
}

func TestHTMLReportFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.html")
	if err := WriteHTMLFile(path, HTMLReport{Report: knownReport()}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parsePage(t, string(b))
	if err := WriteHTMLFile(filepath.Join(t.TempDir(), "no", "such", "dir.html"), HTMLReport{}); err == nil {
		t.Error("no error writing into a missing directory")
	}
}

func TestHTMLNiceAxis(t *testing.T) {
	for _, c := range []struct{ max, top, step float64 }{
		{0, 1, 0.2}, {math.NaN(), 1, 0.2}, {-3, 1, 0.2}, {1, 1, 0.2}, {10, 10, 2}, {10.02, 12, 2}, {56, 60, 10}, {100, 100, 20},
		{200, 200, 50}, {1100, 1200, 200}, {19000, 20000, 5000}, {0.3, 0.3, 0.05}, {7, 8, 2}, {15000, 15000, 5000}, {3, 3, 0.5},
	} {
		top, step := niceAxis(c.max)
		if math.Abs(top-c.top) > 1e-9 || math.Abs(step-c.step) > 1e-9 {
			t.Errorf("niceAxis(%v) = %v, %v; want %v, %v", c.max, top, step, c.top, c.step)
		}
	}
	for _, c := range []struct {
		v, step float64
		want    string
	}{{0, 0.2, "0"}, {0, 1000, "0"}, {0.4, 0.2, "0.4"}, {150, 50, "150"}, {15000, 5000, "15k"}, {2500, 500, "2500"}, {2500, 1000, "2.5k"}, {3e6, 1e6, "3M"}} {
		if got := tickLabel(c.v, c.step); got != c.want {
			t.Errorf("tickLabel(%v, %v) = %q, want %q", c.v, c.step, got, c.want)
		}
	}
}

func TestHTMLFormatting(t *testing.T) {
	for lit, want := range map[string]string{"19000": "19000", "56.789": "56.789", "56.78951": "56.79", "0.123456": "0.1235",
		"0.00001234": "1.234e-05", "1e3": "1000", "-2.5": "-2.5", "12.3456789": "12.346"} {
		if got := fmtNumber(lit); got != want {
			t.Errorf("fmtNumber(%s) = %q, want %q", lit, got, want)
		}
	}
	if got := shellQuote([]string{"herald-bench", "--ws", "ws://127.0.0.1:6001", "", "it's"}); got != `herald-bench --ws ws://127.0.0.1:6001 '' 'it'\''s'` {
		t.Errorf("shellQuote: %s", got)
	}
}
