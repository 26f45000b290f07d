package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// dialFrom opens a WebSocket to the node's app-key from the local address ip and returns the
// client and the close code it got instead of its socket id (0: connected).
func dialFrom(n *node, ip string) (*wstest.Client, int, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: wstest.HandshakeTimeout}
	nc, err := d.Dial("tcp", n.api)
	if err != nil {
		return nil, 0, err
	}
	c, err := wstest.Handshake(nc, n.api, "/app/app-key?protocol=7")
	if err != nil {
		nc.Close()
		return nil, 0, err
	}
	for {
		m, err := c.Read(clusterWait)
		switch {
		case err != nil:
			c.Close()
			return nil, 0, err
		case m.Event == "pusher:connection_established":
			return c, 0, nil
		case m.Close != 0:
			c.Close()
			return nil, m.Close, nil
		}
	}
}

// TestDefaultConnectionRateBoundsAnAddress: with the defaults (connection_rate_per_ip 20,
// burst 100), one address opening 400 connections as fast as it can gets the first 100 at once
// (an office's reconnect through one NAT address) and then about 20 a second: the others are
// refused with 4100 and counted as ip_rate. Another address is not concerned.
func TestDefaultConnectionRateBoundsAnAddress(t *testing.T) {
	n := startServe(t, "defaults")
	n.waitReady(t, 200, `{"ready":true}`)
	const tries, burst, rate = 400, 100, 20
	var connected, refused atomic.Int64
	var mu sync.Mutex
	var clients []*wstest.Client
	var firstErr error
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	start := time.Now()
	for range tries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, code, err := dialFrom(n, "127.0.0.2")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
			case code == 4100:
				refused.Add(1)
			case code != 0:
				if firstErr == nil {
					firstErr = fmt.Errorf("closed with %d", code)
				}
			default:
				connected.Add(1)
				clients = append(clients, c)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	most := burst + int64(rate*elapsed.Seconds()) + 1
	t.Logf("one address, %d connections in %v: %d connected, %d refused with 4100 (at most %d may connect in that time)",
		tries, elapsed.Round(time.Millisecond), connected.Load(), refused.Load(), most)
	if connected.Load() < burst || connected.Load() > most {
		t.Fatalf("%d of %d connections from one address got in within %v; want the burst, %d, and at most %d", connected.Load(), tries, elapsed, burst, most)
	}
	if connected.Load()+refused.Load() != tries {
		t.Fatalf("%d connected and %d refused of %d", connected.Load(), refused.Load(), tries)
	}
	waitMetric(t, n, `refused_connections_total{reason="ip_rate"}`, func(v float64) bool { return v == float64(refused.Load()) })

	// Another address is not concerned.
	c, code, err := dialFrom(n, "127.0.0.3")
	if err != nil || code != 0 {
		t.Fatalf("another address after the first was limited: close %d, %v", code, err)
	}
	c.Close()
}
