package bench

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency summarises publish → receive times in milliseconds, recorded at microsecond
// resolution with three significant digits.
type Latency struct {
	Count  int64   `json:"count"`
	MinMs  float64 `json:"min_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// histogram records latencies in microseconds, from 1 µs to one hour.
type histogram struct{ h *hdrhistogram.Histogram }

func newHistogram() histogram {
	return histogram{hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// newHistograms returns n empty histograms.
func newHistograms(n int) []histogram {
	h := make([]histogram, n)
	for i := range h {
		h[i] = newHistogram()
	}
	return h
}

// record adds one latency; values under a microsecond (or negative, from a clock step) count
// as 1 µs and values over an hour as an hour.
func (h histogram) record(ns int64) {
	us := min(max(ns/int64(time.Microsecond), 1), h.h.HighestTrackableValue())
	_ = h.h.RecordValue(us)
}

func (h histogram) summary() Latency {
	if h.h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		Count:  h.h.TotalCount(),
		MinMs:  ms(h.h.Min()),
		P50Ms:  ms(h.h.ValueAtQuantile(50)),
		P95Ms:  ms(h.h.ValueAtQuantile(95)),
		P99Ms:  ms(h.h.ValueAtQuantile(99)),
		P999Ms: ms(h.h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.h.Max()),
	}
}

// merge adds o's counts.
func (h histogram) merge(o histogram) { h.h.Merge(o.h) }

// MarshalJSON encodes the histogram compactly (HdrHistogram's V2 compressed form, base64 in
// JSON): child processes send their histograms to the parent this way.
func (h histogram) MarshalJSON() ([]byte, error) {
	b, err := h.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

func (h *histogram) UnmarshalJSON(data []byte) error {
	var b []byte
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	d, err := hdrhistogram.Decode(b)
	if err != nil {
		return fmt.Errorf("decode histogram: %w", err)
	}
	h.h = d
	return nil
}
