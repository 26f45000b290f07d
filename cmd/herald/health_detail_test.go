package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/herald-rt/herald/internal/poll"
)

// TestHealthDetailOnMetrics: an ingest source that cannot reach its broker is "down" in the
// public /health, without its error (which names internal hosts); the metrics listener's
// /health gives the error.
func TestHealthDetailOnMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := writeFile(t, "h.yaml", fmt.Sprintf(`
ingest:
  - name: bids
    app: app-id
    redis: {url: "redis://%s/0", subscribe: ["bids"]}
    format: pusher
`, closed))
	n := startServe(t, "detail", "--config", cfg)
	type source struct {
		State string
		Error *string
	}
	read := func(url string) ([]source, string, error) {
		resp, err := n.client.Get(url)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var h struct{ Ingest []source }
		if err := json.Unmarshal(b, &h); err != nil || len(h.Ingest) != 1 {
			return nil, string(b), fmt.Errorf("body %s: %v", b, err)
		}
		return h.Ingest, string(b), nil
	}
	poll.NoError(t, clusterWait, "the source down in the public /health", func() error {
		in, body, err := read("http://" + n.api + "/health")
		if err == nil && in[0].State != "down" {
			err = fmt.Errorf("state %q", in[0].State)
		}
		if err == nil && (in[0].Error != nil || strings.Contains(body, closed)) {
			t.Fatalf("the public /health shows the source's error: %s", body)
		}
		return err
	})
	poll.NoError(t, clusterWait, "the error on the metrics listener's /health", func() error {
		in, body, err := read("http://" + n.metrics + "/health")
		if err == nil && (in[0].State != "down" || in[0].Error == nil || !strings.Contains(*in[0].Error, closed)) {
			err = fmt.Errorf("no error naming %s in %s", closed, body)
		}
		return err
	})
}
