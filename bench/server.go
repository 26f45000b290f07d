package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	Source string        `json:"source"` // the metrics or health URLs, comma-separated: summed
	Before ServerCounts  `json:"before"`
	After  *ServerCounts `json:"after,omitempty"`
	// Returned says whether the counts came back to Before (goroutines within
	// goroutineSlack per node read) within the settle time; Seconds is how long that took or how long it
	// waited.
	Returned bool    `json:"returned"`
	Seconds  float64 `json:"seconds"`
	Error    string  `json:"error,omitempty"`
}

// goroutineSlack is how many more goroutines than before still count as back to baseline, per
// endpoint read: the scrape's own HTTP connection may hold one on the server.
const goroutineSlack = 2

// counter reads a server's counts: from its Prometheus endpoints (<prefix>connected,
// <prefix>channels, go_goroutines) or, without one, from herald's /health, on the REST URL for
// one node and on every node's URL (derived from its WebSocket URL) for several. With several
// endpoints the counts are summed: a cluster's connections, and the channels each node holds.
type counter struct {
	http    *http.Client
	sources []string
	source  string // sources, for the report
	prefix  string
	prom    bool
}

func newCounter(t Target) (*counter, error) {
	c := &counter{http: &http.Client{Timeout: 5 * time.Second}, prefix: t.MetricsPrefix, prom: t.Metrics != ""}
	var err error
	if c.prom {
		c.sources, err = t.metricsURLs()
	} else {
		c.sources, err = t.restNodes()
		for k := range c.sources {
			c.sources[k] += "/health"
		}
	}
	if err != nil {
		return nil, err
	}
	c.source = strings.Join(c.sources, ", ")
	return c, nil
}

// read returns the counts summed over every source.
func (c *counter) read(ctx context.Context) (ServerCounts, error) {
	var sum ServerCounts
	for _, src := range c.sources {
		n, err := c.readOne(ctx, src)
		if err != nil {
			return ServerCounts{}, err
		}
		sum.Connections += n.Connections
		sum.Channels += n.Channels
		if n.Goroutines != nil {
			g := *n.Goroutines
			if sum.Goroutines != nil {
				g += *sum.Goroutines
			}
			sum.Goroutines = &g
		}
	}
	return sum, nil
}

func (c *counter) readOne(ctx context.Context, source string) (ServerCounts, error) {
	if c.prom {
		m, err := scrapeMetrics(ctx, c.http, source, c.prefix)
		if err != nil {
			return ServerCounts{}, err
		}
		g := m.Goroutines
		return ServerCounts{Connections: m.Connections, Channels: m.Channels, Goroutines: &g}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
	if err != nil {
		return ServerCounts{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ServerCounts{}, fmt.Errorf("read %s: %w", source, err)
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
		return ServerCounts{}, fmt.Errorf("read %s: HTTP %d, not herald's health JSON: %.200q", source, resp.StatusCode, body)
	}
	return ServerCounts{Connections: *h.Connections.Current, Channels: *h.Channels}, nil
}

// back reports whether now is back to before, with slack more goroutines.
func back(before, now ServerCounts, slack float64) bool {
	ok := now.Connections <= before.Connections && now.Channels <= before.Channels
	if before.Goroutines != nil && now.Goroutines != nil {
		ok = ok && *now.Goroutines <= *before.Goroutines+slack
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
			if back(s.Before, now, float64(goroutineSlack*len(c.sources))) {
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
