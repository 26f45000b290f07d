package bench

import "math"

// Series colours, distinguishable in colour and, for the dashed ones, without it.
const (
	colorBlue   = "#2563eb"
	colorOrange = "#ea580c"
	colorGrey   = "#6b7280"
	colorGreen  = "#16a34a"
	colorRed    = "#dc2626"
	colorPurple = "#7c3aed"
)

// timelinePlots are the report's plots over one shared x axis: latency, connections, events
// delivered, and, with server samples, the server's memory and CPU.
func timelinePlots(points []Point, server []ServerPoint) []plot {
	n := len(points)
	t := make([]float64, n)
	p50, p99, maxv := make([]float64, n), make([]float64, n), make([]float64, n)
	conns, failed, attempts := make([]float64, n), make([]float64, n), make([]float64, n)
	rateX, rate := deliveryRate(points)
	xTop := 0.0
	for i, p := range points {
		t[i] = p.Second
		xTop = math.Max(xTop, p.Second)
		if p.Delivered > 0 {
			p50[i], p99[i], maxv[i] = p.P50Ms, p.P99Ms, p.MaxMs
		} else {
			p50[i], p99[i], maxv[i] = math.NaN(), math.NaN(), math.NaN()
		}
		conns[i], failed[i], attempts[i] = float64(p.Connections), float64(p.Failed), float64(p.Attempts)
	}
	st := make([]float64, len(server))
	sconns, rss, cpu := make([]float64, len(server)), make([]float64, len(server)), make([]float64, len(server))
	for i, s := range server {
		st[i] = s.Second
		xTop = math.Max(xTop, s.Second)
		sconns[i], rss[i] = s.Connections, s.RSSBytes/(1<<20)
		cpu[i] = math.NaN()
		if i > 0 && s.Second > server[i-1].Second {
			cpu[i] = 100 * (s.CPUSeconds - server[i-1].CPUSeconds) / (s.Second - server[i-1].Second)
		}
	}

	connSeries := []series{
		{id: "connections", name: "connections", color: colorGreen, x: t, y: conns},
		{id: "attempts", name: "attempts", color: colorGrey, dash: true, x: t, y: attempts},
		{id: "failed", name: "failed attempts", color: colorRed, x: t, y: failed},
	}
	if len(server) > 0 {
		connSeries = append(connSeries, series{id: "server-connections", name: "server-reported", color: colorPurple, dash: true, x: st, y: sconns})
	}
	plots := []plot{
		{id: "latency", title: "Publish → receive latency per second", yLabel: "latency (ms)", unit: "ms", xTop: xTop, series: []series{
			{id: "p50", name: "P50", color: colorBlue, x: t, y: p50},
			{id: "p99", name: "P99", color: colorOrange, x: t, y: p99},
			{id: "max", name: "max", color: colorGrey, dash: true, x: t, y: maxv},
		}},
		{id: "connections", title: "Connections (open and subscribed; attempts and failures so far)", yLabel: "connections", xTop: xTop, series: connSeries},
		{id: "delivered", title: "Events delivered per second", yLabel: "events/s", unit: "events/s", xTop: xTop, series: []series{
			{id: "delivered", name: "events delivered", color: colorBlue, x: rateX, y: rate},
		}},
	}
	if len(server) > 0 {
		plots = append(plots,
			plot{id: "server-rss", title: "Server resident memory (from --metrics)", yLabel: "RSS (MiB)", unit: "MiB", xTop: xTop, series: []series{
				{id: "rss", name: "RSS", color: colorPurple, x: st, y: rss},
			}},
			plot{id: "server-cpu", title: "Server CPU (from --metrics; 100% is one core)", yLabel: "CPU (%)", unit: "%", xTop: xTop, series: []series{
				{id: "cpu", name: "CPU", color: colorOrange, x: st, y: cpu},
			}})
	}
	return plots
}

// timelineActive reports whether any second saw a connection attempt, an open connection or
// an event.
func timelineActive(points []Point) bool {
	for _, p := range points {
		if p.Attempts > 0 || p.Delivered > 0 || p.Connections != 0 {
			return true
		}
	}
	return false
}

// deliveryRate is events delivered per second of each point's interval. An interval shorter
// than half a second (the last one, cut short when the run stopped) is merged into the one
// before it, where a handful of events would otherwise make a spike or a dip.
func deliveryRate(points []Point) (x, rate []float64) {
	var start []float64 // where each kept interval starts
	prev := 0.0         // where the previous point's interval ended
	for i, p := range points {
		dt := p.Second - prev
		if dt <= 0 {
			continue
		}
		if k := len(x) - 1; dt < 0.5 && i == len(points)-1 && k >= 0 {
			events := rate[k]*(x[k]-start[k]) + float64(p.Delivered)
			x[k], rate[k] = p.Second, events/(p.Second-start[k])
			break
		}
		x, rate, start = append(x, p.Second), append(rate, float64(p.Delivered)/dt), append(start, prev)
		prev = p.Second
	}
	return x, rate
}
