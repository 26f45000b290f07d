package metrics

import (
	"net/http"
	"net/http/pprof"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultPrefix starts every herald metric name.
const DefaultPrefix = "herald_"

// Registry holds herald's metrics: the node's (Source) and the API's counters, the publish latency
// histogram, and the Go runtime and process collectors.
type Registry struct {
	reg     *prometheus.Registry
	HTTP    *HTTP
	latency *prometheus.HistogramVec
}

// New builds the registry for apps. Call Attach with the node's Source once it exists; until
// then only the runtime and API metrics are exported.
func New(prefix string, appIDs []string) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), HTTP: NewHTTP(appIDs)}
	r.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: prefix + "publish_latency_seconds",
		Help: "Time from a publish reaching the node to the last fan-out worker having queued its frame for every local subscriber.",
		// 10 µs to about 2.6 s.
		Buckets: prometheus.ExponentialBuckets(10e-6, 2, 19),
	}, []string{"app_id"})
	r.reg.MustRegister(r.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// PublishLatency returns the observer of app's publish latency, in seconds, for the server
// (cmd/herald hands it to the server's Config.PublishLatency). The app's series is made at
// its first observation: an app that never publishes (most of an app store's thousands)
// costs neither the histogram's memory nor lines on /metrics.
func (r *Registry) PublishLatency(appID string) prometheus.Observer {
	return &lazyObserver{vec: r.latency, label: appID}
}

// Attach exports src's counters under prefix.
func (r *Registry) Attach(prefix string, src Source) {
	r.reg.MustRegister(newCollector(prefix, src, r.HTTP))
}

// BuildInfo exports <prefix>build_info, a gauge of 1 labelled with herald's version and the
// Go version it was built with.
func (r *Registry) BuildInfo(prefix, version string) {
	r.GaugeFunc(prefix+"build_info", "Always 1; its labels are the version of herald and of Go that built it.",
		map[string]string{"version": version, "goversion": runtime.Version()}, func() float64 { return 1 })
}

// GaugeFunc exports f, read at each scrape, as a gauge named name (prefix included) with
// constant labels (nil for none); for counts kept outside the server, such as the API port's.
func (r *Registry) GaugeFunc(name, help string, labels map[string]string, f func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
}

// CounterFunc is GaugeFunc for a counter.
func (r *Registry) CounterFunc(name, help string, labels map[string]string, f func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
}

// Handler serves the metrics in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Gatherer exposes the registry to tests.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// PprofHandler serves net/http/pprof's profiles under /debug/pprof/. It does not serve
// /debug/pprof/cmdline (404): the command line may hold secrets passed as flags.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not served: the command line may hold secrets passed as flags", http.StatusNotFound)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
