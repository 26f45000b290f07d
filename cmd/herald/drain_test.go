package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// TestDrainDelay runs `herald serve` and stops it as an orchestrator does, with SIGTERM.
//
// "second signal": with a drain delay far longer than the test, /ready answers 503 draining
// and /health says draining, while a client connected before the signal is still served (a
// ping is answered) and a new one connects, subscribes and gets a REST publish; a second
// SIGTERM then ends the delay: both get 4200 and the node exits 0 long before the delay.
//
// "delay runs out": with a 2 s delay and one signal, the client's 4200 comes no sooner than
// 2 s after the signal, and the node exits 0.
func TestDrainDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs herald serve")
	}
	t.Run("second signal", func(t *testing.T) {
		n := startNode(t, "drain", "", "--shutdown-drain-delay", "1h")
		n.waitReady(t, http.StatusOK, `{"ready":true}`)
		before := dialNode(t, n)
		sigterm(t, n)
		n.waitReady(t, http.StatusServiceUnavailable, `{"ready":false,"status":"draining"}`)
		n.waitHealth(t, "draining", func(h nodeHealth) error {
			if h.Status != "draining" {
				return fmt.Errorf("status %q, want draining", h.Status)
			}
			return nil
		})

		if err := before.WriteText(`{"event":"pusher:ping","data":{}}`); err != nil {
			t.Fatal(err)
		}
		if _, err := before.Expect("pusher:pong", clusterWait); err != nil {
			t.Fatalf("a client connected before the signal, pinging while the node drains: %v", err)
		}
		after := dialNode(t, n)
		if err := after.Subscribe("news", "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := after.Expect("pusher_internal:subscription_succeeded", clusterWait); err != nil {
			t.Fatalf("a client connected while draining: %v", err)
		}
		if status, _, body := n.publish(t, "news", "still serving"); status != http.StatusOK {
			t.Fatalf("publish while draining: %d %s", status, body)
		}
		if m, err := after.Expect("tick", clusterWait); err != nil || m.DataString() != "still serving" {
			t.Fatalf("the publish while draining: %+v, %v", m, err)
		}

		sigterm(t, n)
		for name, c := range map[string]*wstest.Client{"connected before the signal": before, "connected while draining": after} {
			if code, err := c.ExpectClose(clusterWait); err != nil || code != 4200 {
				t.Errorf("client %s: close %d (%v), want 4200", name, code, err)
			}
		}
		waitExit(t, n)
		if !strings.Contains(n.logs.String(), "second signal: ending the drain delay") {
			t.Errorf("no log line for the second signal")
		}
	})

	t.Run("delay runs out", func(t *testing.T) {
		const delay = 2 * time.Second
		n := startNode(t, "drain", "", "--shutdown-drain-delay", delay.String())
		n.waitReady(t, http.StatusOK, `{"ready":true}`)
		c := dialNode(t, n)
		start := time.Now()
		sigterm(t, n)
		code, err := c.ExpectClose(clusterWait)
		closed := time.Since(start)
		if err != nil || code != 4200 {
			t.Fatalf("close %d (%v), want 4200", code, err)
		}
		if closed < delay {
			t.Errorf("closed %v after SIGTERM, before the drain delay of %v", closed, delay)
		}
		waitExit(t, n)
		var drainLine bool
		for line := range strings.Lines(n.logs.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(fmt.Sprint(rec["msg"]), "draining:") {
				drainLine = rec["drain_delay"] == delay.String()
			}
		}
		if !drainLine {
			t.Errorf("no drain line with drain_delay %q in the log", delay)
		}
	})
}

// dialNode connects a raw Pusher client to n and reads its connection_established.
func dialNode(t *testing.T, n *node) *wstest.Client {
	t.Helper()
	c, err := wstest.Dial(n.api, "/app/"+restApp.Key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.SocketID(clusterWait); err != nil {
		t.Fatal(err)
	}
	return c
}

// sigterm sends SIGTERM to n.
func sigterm(t *testing.T, n *node) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for n to exit and fails unless it exited 0.
func waitExit(t *testing.T, n *node) {
	t.Helper()
	select {
	case <-n.done:
		if n.err != nil {
			t.Fatalf("%s exited with %v", n.name, n.err)
		}
	case <-time.After(clusterWait):
		t.Fatalf("%s still running %v after its connections were closed", n.name, clusterWait)
	}
}
