package bench

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/session"
)

func TestActivityTimeoutOf(t *testing.T) {
	for _, c := range []struct {
		data string
		want time.Duration
	}{
		{`"{\"socket_id\":\"1.2\",\"activity_timeout\":120}"`, 120 * time.Second}, // Pusher's: a string holding JSON
		{`{"socket_id":"1.2","activity_timeout":30}`, 30 * time.Second},
		{`"{\"socket_id\":\"1.2\"}"`, 0},
		{`"not json"`, 0},
	} {
		if got := time.Duration(activityTimeoutOf(json.RawMessage(c.data))); got != c.want {
			t.Errorf("activityTimeoutOf(%s) = %v, want %v", c.data, got, c.want)
		}
	}
}

// TestSpreadSettlesAnsweredPings: spreading the clients' next pings over a shorter activity
// timeout moves their last receipt back; a ping already answered must not then look
// unanswered (its client stopped pinging until its pong timeout, and an idle window saw
// almost no client pings), while one still waiting stays outstanding.
func TestSpreadSettlesAnsweredPings(t *testing.T) {
	now := time.Now().UnixNano()
	sent := now - int64(900*time.Millisecond)
	answered, waiting := &client{pingAt: sent}, &client{pingAt: sent}
	answered.lastRx.Store(sent + int64(time.Millisecond)) // the pong
	waiting.lastRx.Store(sent - int64(time.Second))
	spread([]*client{waiting, answered}, time.Second, now)
	if answered.pingAt != 0 {
		t.Errorf("answered ping still outstanding after the spread (pingAt %d, lastRx %d)", answered.pingAt, answered.lastRx.Load())
	}
	if waiting.pingAt != sent {
		t.Errorf("unanswered ping settled by the spread")
	}
	for k, c := range []*client{waiting, answered} {
		if got, want := c.lastRx.Load(), now-int64(time.Second)*int64(k*7919%1000)/1000; got != want {
			t.Errorf("client %d: lastRx %d, want %d", k, got, want)
		}
	}
}

func TestKernelMemory(t *testing.T) {
	before := kernelSample{TCPInuse: 10, TCPMemPages: 1, SlabKB: 1000, SUnreclaim: 500, AvailableKB: 100000}
	after := kernelSample{TCPInuse: 210, TCPMemPages: 1, SlabKB: 2000, SUnreclaim: 1000, AvailableKB: 99000}
	k := kernelMemory(before, after, 100)
	if k.Sockets != 200 || k.SlabPerSocket != 5120 || k.SUnreclaimPerSock != 2560 || k.BuffersPerSocket != 0 || k.AvailablePerConn != 10240 {
		t.Fatalf("kernelMemory = %+v", k)
	}
	if runtime.GOOS == "linux" {
		if s, ok := readKernel(); !ok || s.TCPInuse < 0 || s.SlabKB <= 0 || s.AvailableKB <= 0 {
			t.Fatalf("readKernel = %+v, %v; want this machine's figures", s, ok)
		}
	}
}

// TestFanoutIdle: the quiet windows before the events measure memory and CPU, and the
// clients keep pusher-js's activity check: at the server's 2 s activity_timeout (shorter
// than their own 120 s) one side pings every client in the first window; in the second, with
// their own timeout at 1 s, the clients ping, and every ping is answered.
func TestFanoutIdle(t *testing.T) {
	target, _ := startServer(t, session.Config{MaxConnections: 1000, ActivityTimeout: 2 * time.Second}, nil)
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 20, Events: 1, Wait: patience,
		Idle: 4 * time.Second, IdleFast: 3 * time.Second, IdleFastActivity: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Delivery; d.Delivered != 20 || d.Missing != 0 {
		t.Fatalf("delivery %+v; want all 20", d)
	}
	ph := rep.Idle
	if ph == nil || len(ph.Windows) != 2 {
		t.Fatalf("idle phase %+v; want two windows", ph)
	}
	if ph.ServerRSS == nil || ph.ServerRSS.AfterBytes <= 0 {
		t.Errorf("server RSS %+v; want it measured", ph.ServerRSS)
	}
	if runtime.GOOS == "linux" && ph.Kernel == nil {
		t.Error("no kernel figures on Linux")
	}
	w := ph.Windows[0]
	if w.ClientActivitySeconds != 120 || w.Pings.Sent+w.Pings.Answered < 20 || w.Server == nil || w.Seconds < 4 {
		t.Errorf("first window %+v; want every client pinged once at least, CPU measured", w)
	}
	w = ph.Windows[1]
	if w.ClientActivitySeconds != 1 || w.Pings.Sent < 20 || w.Pings.Unanswered != 0 {
		t.Errorf("second window %+v; want the clients' own pings, all answered", w)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"per connection per second", "activity timeout 1s", "per socket"} {
		if runtime.GOOS != "linux" && want == "per socket" {
			continue
		}
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestFanoutIdleProcs: the children report their clients' pings and take the activity
// timeout of each window.
func TestFanoutIdleProcs(t *testing.T) {
	base, _ := startServer(t, session.Config{MaxConnections: 1000}, nil)
	target := childTarget(t, base, 2)
	rep, err := Fanout(t.Context(), FanoutConfig{Target: target, Subs: 20, Events: 1, Wait: patience,
		Idle: time.Second, IdleFast: 3 * time.Second, IdleFastActivity: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Idle == nil || len(rep.Idle.Windows) != 2 {
		t.Fatalf("idle phase %+v; want two windows", rep.Idle)
	}
	if w := rep.Idle.Windows[1]; w.Pings.Sent < 20 || w.Pings.Unanswered != 0 {
		t.Errorf("second window %+v; want every child's clients pinging, all answered", w)
	}
}
