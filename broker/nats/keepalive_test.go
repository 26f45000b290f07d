package nats_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/internal/poll"
)

// TestKeepaliveConfigured: a server that stops answering PINGs (and keeps the connection
// open) is given up after the configured keepalive, 100 ms × 2 here, where the default
// (3 s × 3) takes 9 to 12 s; the broker then reconnects.
func TestKeepaliveConfigured(t *testing.T) {
	url := silentServer(t)
	b, err := nats.New(nats.Config{URL: url, PingInterval: 100 * time.Millisecond, PingsOutstanding: 2,
		Common: broker.Common{NodeID: "n1"}}, func(herald.BusMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	start := time.Now()
	poll.Until(t, 6*time.Second, "a reconnection after the pings went unanswered", func() (bool, string) {
		n := b.Stats().Reconnects
		return n > 0, fmt.Sprintf("%d reconnections", n)
	})
	t.Logf("reconnected %v after connecting", time.Since(start).Round(time.Millisecond))
}

func TestKeepaliveNegativeRefused(t *testing.T) {
	for _, cfg := range []nats.Config{{PingInterval: -time.Second}, {PingsOutstanding: -1}} {
		cfg.URL = "nats://127.0.0.1:1"
		if b, err := nats.New(cfg, func(herald.BusMessage) {}); err == nil {
			_ = b.Close(context.Background())
			t.Errorf("New(%+v) accepted a negative keepalive", cfg)
		}
	}
}

// silentServer starts a loopback listener that speaks just enough NATS to connect a client
// (INFO, then PONG to the PING of the handshake) and then reads and answers nothing, as a
// server starved of CPU or cut off by the network would. It returns the URL.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				fmt.Fprintf(c, "INFO {\"server_id\":\"silent\",\"version\":\"2.9.10\",\"proto\":1,\"max_payload\":1048576}\r\n")
				r := bufio.NewReader(c)
				answered := false
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "PING") && !answered {
						answered = true
						if _, err := c.Write([]byte("PONG\r\n")); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}
