package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/herald-rt/herald/metrics"
)

// value returns the value of the series name{label=val}, and whether it exists.
func value(t *testing.T, fams []*dto.MetricFamily, name, label, val string) (float64, bool) {
	t.Helper()
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == val {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// series is one expected sample: name{label=val} == want.
type series struct {
	name, label, val string
	want             float64
}

// expect fails the test for each series absent from fams or of another value.
func expect(t *testing.T, fams []*dto.MetricFamily, want []series) {
	t.Helper()
	for _, w := range want {
		if got, ok := value(t, fams, w.name, w.label, w.val); !ok || got != w.want {
			t.Errorf("%s{%s=%q} = %v (present %v), want %v", w.name, w.label, w.val, got, ok, w.want)
		}
	}
}

func TestPprofHandler(t *testing.T) {
	rec := httptest.NewRecorder()
	metrics.PprofHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/goroutine?debug=1", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "goroutine profile") {
		t.Fatalf("pprof goroutine: %d %.200s", rec.Code, rec.Body.String())
	}
}

// TestPprofNoCmdline: the pprof listener does not show the command line, where secrets passed
// as flags (--app-secret, --console-token, --cluster-url) would be.
func TestPprofNoCmdline(t *testing.T) {
	rec := httptest.NewRecorder()
	metrics.PprofHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/cmdline", nil))
	if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), os.Args[0]) {
		t.Fatalf("/debug/pprof/cmdline: %d %.200s; want 404 without the command line", rec.Code, rec.Body.String())
	}
}
