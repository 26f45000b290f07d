package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ServerCounts is what the server says it holds.
type ServerCounts struct {
	Connections float64  `json:"connections"`
	Channels    float64  `json:"channels"`
	Goroutines  *float64 `json:"goroutines,omitempty"` // nil: the source does not say
}

// ServerState compares the server's counts before and after a run.
type ServerState struct {
	Source string        `json:"source"` // the metrics or health URL
	Before ServerCounts  `json:"before"`
	After  *ServerCounts `json:"after,omitempty"`
	// Returned says whether the counts came back to Before (goroutines within
	// goroutineSlack) within the settle time; Seconds is how long that took or how long it
	// waited.
	Returned bool    `json:"returned"`
	Seconds  float64 `json:"seconds"`
	Error    string  `json:"error,omitempty"`
}

// goroutineSlack is how many more goroutines than before still count as back to baseline:
// the scrape's own HTTP connection may hold one on the server.
const goroutineSlack = 2

// counter reads a server's counts: from its Prometheus endpoint (<prefix>connected,
// <prefix>channels, go_goroutines) or, without one, from herald's /health.
type counter struct {
	http   *http.Client
	source string
	prefix string
	prom   bool
}

func newCounter(t Target) (*counter, error) {
	c := &counter{http: &http.Client{Timeout: 5 * time.Second}, source: t.Metrics, prefix: t.MetricsPrefix, prom: t.Metrics != ""}
	if !c.prom {
		u, err := url.Parse(t.REST)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("--rest %q: not a URL for /health", t.REST)
		}
		c.source = u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/") + "/health"
	}
	return c, nil
}

func (c *counter) read(ctx context.Context) (ServerCounts, error) {
	if c.prom {
		m, err := scrapeMetrics(ctx, c.http, c.source, c.prefix)
		if err != nil {
			return ServerCounts{}, err
		}
		g := m.Goroutines
		return ServerCounts{Connections: m.Connections, Channels: m.Channels, Goroutines: &g}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.source, nil)
	if err != nil {
		return ServerCounts{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ServerCounts{}, fmt.Errorf("read %s: %w", c.source, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var h struct {
		Connections struct {
			Current *float64 `json:"current"`
		} `json:"connections"`
		Channels *float64 `json:"channels"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Connections.Current == nil || h.Channels == nil {
		return ServerCounts{}, fmt.Errorf("read %s: HTTP %d, not herald's health JSON: %.200q", c.source, resp.StatusCode, body)
	}
	return ServerCounts{Connections: *h.Connections.Current, Channels: *h.Channels}, nil
}

// back reports whether now is back to before.
func back(before, now ServerCounts) bool {
	ok := now.Connections <= before.Connections && now.Channels <= before.Channels
	if before.Goroutines != nil && now.Goroutines != nil {
		ok = ok && *now.Goroutines <= *before.Goroutines+goroutineSlack
	}
	return ok
}

// settleBack polls the server every 100 ms, up to d, until its counts are back to s.Before.
func (c *counter) settleBack(ctx context.Context, s *ServerState, d time.Duration) {
	start := time.Now()
	for {
		now, err := c.read(ctx)
		if err == nil {
			s.After, s.Error = &now, ""
			if back(s.Before, now) {
				s.Returned = true
				break
			}
		} else {
			s.Error = err.Error()
		}
		if time.Since(start) >= d || sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) != nil {
			break
		}
	}
	s.Seconds = time.Since(start).Seconds()
}

func (s ServerCounts) String() string {
	g := "?"
	if s.Goroutines != nil {
		g = fmt.Sprintf("%.0f", *s.Goroutines)
	}
	return fmt.Sprintf("%.0f connections, %.0f channels, %s goroutines", s.Connections, s.Channels, g)
}
