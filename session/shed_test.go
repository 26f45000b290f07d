package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/session"
)

// TestClusterShedding: a node too slow for what the bus brings drops events from its full
// receive queue. The subscribers of a channel without history there are told (pusher:error
// and close 4100, which pusher-js reconnects after) instead of silently missing events,
// while the node goes on hearing the others' state: for longer than the node timeout, no
// node declares the other dead (no member_removed on either side), and presence members
// stay subscribed.
func TestClusterShedding(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a node for 8 s")
	}
	bus := memory.NewBus()
	sc := cluster.Config{Heartbeat: 100 * time.Millisecond, NodeTimeout: 2 * time.Second}
	var slow atomic.Bool
	var flooded atomic.Int64 // flood events node-1 took from its queue
	n0 := startNodeQueue(t, bus, memory.Config{NodeID: "node-0"}, session.Config{}, sc, nil, nil, app)
	n1 := startNodeQueue(t, bus, memory.Config{NodeID: "node-1", QueueSize: 64}, session.Config{}, sc, nil,
		func(m herald.BusMessage, deliver herald.BusHandler) {
			if m.Channel == "flood" {
				flooded.Add(1)
			}
			if slow.Load() && m.Kind == herald.BusEvent {
				time.Sleep(5 * time.Millisecond) // a node that cannot keep up
			}
			deliver(m)
		}, app)
	p0, _ := join(t, n0, "presence-room", "u0")
	p1, _ := join(t, n1, "presence-room", "u1")
	if _, err := p0.Expect("pusher_internal:member_added", patience); err != nil {
		t.Fatal(err)
	}
	sub, _ := join(t, n1, "flood", "")
	// The node's interest outlives its subscriber, whom the loss closes: the flood goes on
	// reaching it for the whole run.
	if err := n1.b.Subscribe(t.Context(), "app-id", "flood"); err != nil {
		t.Fatal(err)
	}

	// The flooded channel's subscriber reads as fast as it can, and is told, with a code
	// pusher-js reconnects after, that this node dropped events of its channel.
	type outcome struct {
		got  int
		err  error
		data string
	}
	done := make(chan outcome, 1)
	go func() {
		got := 0
		for {
			m, err := sub.Read(patience)
			switch {
			case err != nil:
				done <- outcome{got, err, ""}
				return
			case m.Event == "tick":
				got++
			case m.Event == "pusher:error":
				if code, err := sub.ExpectClose(patience); err != nil || code != 4100 {
					done <- outcome{got, fmt.Errorf("close code %d, %v; want 4100", code, err), string(m.Data)}
					return
				}
				done <- outcome{got, nil, string(m.Data)}
				return
			case m.Close != 0:
				done <- outcome{got, fmt.Errorf("closed with %d without a pusher:error", m.Close), ""}
				return
			}
		}
	}()

	slow.Store(true)
	end := time.Now().Add(8 * time.Second) // 4 node timeouts
	sent := 0
	for ; time.Now().Before(end); sent++ {
		if err := n0.h.Publish("app-id", herald.Event{Name: "tick", Channel: "flood", Data: strconv.Itoa(sent)}); err != nil {
			t.Fatal(err)
		}
	}
	slow.Store(false)
	t.Logf("published %d events in 8 s", sent)
	o := <-done
	if o.err != nil {
		t.Fatalf("subscriber of the flooded channel, after %d events: %v", o.got, o.err)
	}
	var d struct {
		Code    int
		Message string
	}
	if err := json.Unmarshal([]byte(o.data), &d); err != nil || d.Code != 4100 || !strings.Contains(d.Message, "dropped events") {
		t.Fatalf("pusher:error data %s; want code 4100 saying this node dropped events", o.data)
	}
	if o.got >= sent {
		t.Fatalf("the subscriber got all %d events before 4100: nothing was shed, the test proves nothing", sent)
	}
	t.Logf("the flooded channel's subscriber got %d of %d events, then 4100: %s", o.got, sent, d.Message)

	// Once node-1 has caught up with its queue (what it received stops moving), neither
	// node declared the other dead: no member left, on either side.
	if err := n1.b.Unsubscribe(context.Background(), "app-id", "flood"); err != nil {
		t.Fatal(err)
	}
	last, since := flooded.Load(), time.Now()
	poll.Until(t, patience, "node-1 to drain its queue", func() (bool, string) {
		if n := flooded.Load(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > 300*time.Millisecond, fmt.Sprintf("%d flood events taken", last)
	})
	// Neither node declared the other dead: no member left, on either side.
	expectSilence(t, p0, n1, "presence-room", "pusher_internal:member_removed")
	expectSilence(t, p1, n0, "presence-room", "pusher_internal:member_removed")
	if n := n1.h.MissedChannels(); n == 0 {
		t.Error("MissedChannels = 0 on the shedding node")
	}
}
