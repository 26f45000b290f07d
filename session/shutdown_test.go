package session_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// TestShutdownDuringHandshakes shuts the server down while clients are still connecting. A
// client's connection_established goes out before its worker owns the connection, so a
// shutdown can pass the worker first; every client must still get a 4200 close (from the
// shutdown, or as a refusal once the server drains), and Shutdown must not wait out its deadline
// for a connection it forgot.
func TestShutdownDuringHandshakes(t *testing.T) {
	h, addr := startServer(t, session.Config{})
	const n = 200
	codes := make(chan string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := wstest.Dial(addr, "/app/app-key?protocol=7")
			if err != nil {
				codes <- "dial: " + err.Error()
				return
			}
			defer c.Close()
			code, err := c.ExpectClose(patience)
			if err != nil {
				codes <- err.Error()
				return
			}
			codes <- fmt.Sprint(code)
		}()
	}
	// Shut down while some have connected and the rest are on their way.
	poll.Until(t, patience, "a first connection", func() (bool, string) {
		n := h.Stats().Connections
		return n > 0, fmt.Sprint(n, " connections")
	})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	start := time.Now()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after %v: %v (%d connections left)", time.Since(start), err, h.Stats().Connections)
	}
	wg.Wait()
	close(codes)
	got := map[string]int{}
	for c := range codes {
		got[c]++
	}
	if got["4200"] != n {
		t.Fatalf("closes seen by the %d clients: %v; want 4200 for all", n, got)
	}
}
