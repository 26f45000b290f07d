package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// TestServeReconnectStorm: a node's clients all come back at once, more of them than
// max_http_connections (256), to `herald serve` with its default port settings on a machine
// the storm keeps busy: the port borrows the free WebSocket descriptors, so every client is
// upgraded and none is evicted as a slow request, refused or timed out. (With the port capped
// at 256, connections whose goroutine or client had not run yet for 100 ms were cut.) The
// clients all dial from one address, as through a proxy that hides theirs: the per-address
// limit is off (connection_rate_per_ip 0), as it must be behind one.
func TestServeReconnectStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm of 600 clients against herald serve")
	}
	const clients = 600 // of the 652 WebSocket connections the helper's 1,024 descriptors allow
	port, mport := freePort(t), freePort(t)
	addr, maddr := "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(mport)
	var health struct{ Status string }
	serveHelper(t, addr, fmt.Sprintf("--port %d --metrics-port %d --log-level warn --connection-rate-per-ip 0", port, mport), &health)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

	conns, failed, firstErr := wstest.Storm(addr, "/app/app-key?protocol=7", clients)
	defer func() {
		for _, cl := range conns {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	m, err := scrapeHTTP(client, "http://"+maddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("port after the storm: %v", m)
	if failed > 0 {
		t.Fatalf("%d of %d clients failed, first: %v", failed, clients, firstErr)
	}
	for _, name := range []string{`herald_http_connections_evicted_total{reason="slow"}`, `herald_http_connections_evicted_total{reason="idle"}`,
		"herald_http_connections_refused_total", "herald_http_request_timeouts_total"} {
		if v, ok := m[name]; !ok || v != "0" {
			t.Errorf("%s = %q, want 0", name, v)
		}
	}
	if m["herald_node_connections"] != strconv.Itoa(clients) {
		t.Errorf("herald_node_connections = %q, want %d", m["herald_node_connections"], clients)
	}
	if m["herald_http_connections_limit"] == "256" || m["herald_http_connections_limit"] == "" {
		t.Errorf("herald_http_connections_limit = %q: the port borrows no free WebSocket descriptor", m["herald_http_connections_limit"])
	}
}

// scrapeHTTP reads the herald_http_*, herald_node_connections series of a metrics endpoint.
func scrapeHTTP(client *http.Client, url string) (map[string]string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "herald_http_") && !strings.HasPrefix(line, "herald_node_connections") {
			continue
		}
		if k := strings.LastIndexByte(line, ' '); k > 0 {
			m[line[:k]] = line[k+1:]
		}
	}
	return m, sc.Err()
}
