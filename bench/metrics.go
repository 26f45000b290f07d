package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// ServerMetrics is what a server's Prometheus endpoint says about itself. herald exports these
// names (with its default prefix "herald_"); Soketi and Sockudo export "connected" under their
// own prefixes, so Prefix selects them.
type ServerMetrics struct {
	Connections float64 `json:"connections"` // <prefix>connected, summed over apps
	Channels    float64 `json:"channels"`    // <prefix>channels, summed over apps (herald only)
	Goroutines  float64 `json:"goroutines"`  // go_goroutines (Go servers only)
	RSSBytes    float64 `json:"rss_bytes"`   // process_resident_memory_bytes
	CPUSeconds  float64 `json:"cpu_seconds"` // process_cpu_seconds_total
}

// scrapeMetrics reads url (Prometheus text format) and sums the series ServerMetrics names,
// whatever their labels. A series that is absent reads as zero.
func scrapeMetrics(ctx context.Context, client *http.Client, url, prefix string) (ServerMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ServerMetrics{}, fmt.Errorf("--metrics %q: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return ServerMetrics{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ServerMetrics{}, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	var m ServerMetrics
	fields := map[string]*float64{
		prefix + "connected":            &m.Connections,
		prefix + "channels":             &m.Channels,
		"go_goroutines":                 &m.Goroutines,
		"process_resident_memory_bytes": &m.RSSBytes,
		"process_cpu_seconds_total":     &m.CPUSeconds,
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			if j := strings.LastIndexByte(line, '}'); j >= 0 {
				rest, ok = strings.TrimSpace(line[j+1:]), true
			}
		}
		dst := fields[name]
		if dst == nil || !ok {
			continue
		}
		val, _, _ := strings.Cut(strings.TrimSpace(rest), " ") // drop an optional timestamp
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return ServerMetrics{}, fmt.Errorf("scrape %s: %q: %w", url, line, err)
		}
		*dst += v
	}
	if err := sc.Err(); err != nil {
		return ServerMetrics{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}
