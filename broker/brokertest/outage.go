package brokertest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// Restore bounds the time from the bus server answering again to cross-node delivery
// working again, with every interest restored.
const Restore = 5 * time.Second

// Hold is how long the bus server stays down: long enough for the engines' reconnection
// backoff to reach its cap.
const Hold = 3 * time.Second

// prompt bounds one Publish or Subscribe while the bus is down.
const prompt = 2 * time.Second

// testOutage stops the bus server: publishes fail promptly with CodeUnavailable, goroutines
// and memory stay bounded; the server starts again on the same port: within Restore every
// interest, including one taken during the outage, is in place and delivery works.
func testOutage(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	if c.Stop == nil || c.Start == nil {
		t.Skip("this engine has no bus server to stop")
	}
	a, b := c.Brokers[0], c.Brokers[1]
	subscribe(t, b, "app", "before")
	publish(t, a, "app", "before", "0")
	c.rec[1].waitCount(t, "before", 1)
	reconnects := a.Stats().Reconnects + b.Stats().Reconnects

	c.Stop(t)
	stopped := time.Now()
	poll.Until(t, Wait, "both brokers to report the bus down", func() (bool, string) {
		return !a.Connected() && !b.Connected(), fmt.Sprintf("connected: node0 %v, node1 %v", a.Connected(), b.Connected())
	})
	base, fds := runtime.NumGoroutine(), openFiles()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := ms.HeapAlloc

	payload := make([]byte, 10<<10)
	n := 0
	for i := 0; i < 2000 || time.Since(stopped) < Hold; i++ {
		n++
		if i%10 == 0 {
			time.Sleep(time.Millisecond) // pacing: the outage lasts Hold whatever the machine's speed
		}
		ctx, cancel := context.WithTimeout(context.Background(), Wait)
		t0 := time.Now()
		err := a.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "before", Payload: payload})
		cancel()
		if d := time.Since(t0); d > prompt {
			t.Fatalf("Publish %d during the outage took %v", i, d)
		}
		if herald.CodeOf(err) != herald.CodeUnavailable {
			t.Fatalf("Publish %d during the outage returned %v; want a CodeUnavailable error", i, err)
		}
	}
	flushDown(t, a)
	if s := a.Stats(); s.PublishErrors < uint64(n) || s.Connected {
		t.Errorf("stats during the outage %+v; want at least %d publish errors, not connected", s, n)
	}
	// A subscription taken during the outage is not confirmed, but restored later.
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	t0 := time.Now()
	err := b.Subscribe(ctx, "app", "during")
	cancel()
	if d := time.Since(t0); err == nil || d > prompt {
		t.Errorf("Subscribe during the outage returned %v after %v; want an error within %v", err, d, prompt)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if n := runtime.NumGoroutine(); n > base+10 {
		t.Errorf("goroutines grew from %d to %d during the outage", base, n)
	}
	if n := openFiles(); n > fds+10 {
		t.Errorf("open files grew from %d to %d during the outage", fds, n)
	}
	if ms.HeapAlloc > heap+16<<20 {
		t.Errorf("heap grew from %d to %d bytes during the outage (%d refused publishes of 10 KB)", heap, ms.HeapAlloc, n)
	}

	c.Start(t)
	restarted := time.Now()
	// Interests restored: messages published now on both channels reach node1. Each
	// publish attempt is a probe; the first ones may find node1 not yet back.
	poll.Until(t, Wait, `node1 to have 2 messages on "before" and 1 on "during" after the restart`, func() (bool, string) {
		before, during := len(c.rec[1].on("before")), len(c.rec[1].on("during"))
		if during > 0 && before >= 2 {
			return true, ""
		}
		for _, ch := range []string{"before", "during"} {
			_ = a.Publish(context.Background(), herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: ch, Payload: []byte("after")})
		}
		return false, fmt.Sprintf("%d on \"before\" and %d on \"during\"; connected: node0 %v, node1 %v", before, during, a.Connected(), b.Connected())
	})
	if d := time.Since(restarted); d > Restore {
		t.Errorf("delivery came back %v after the server answered again; want within %v", d, Restore)
	} else {
		t.Logf("delivery restored %v after the server answered again", d)
	}
	if s := a.Stats().Reconnects + b.Stats().Reconnects; s < reconnects+2 {
		t.Errorf("Reconnects went from %d to %d; want both nodes counted", reconnects, s)
	}
	// Flush works again: the messages of the outage are not held against it.
	publish(t, a, "app", "before", "flushed")
	flush(t, a)
	// The interest taken during the outage is now confirmed; it is counted once.
	subscribe(t, b, "app", "during")
	if s := b.Stats(); s.Interests != 2 || !s.Connected {
		t.Errorf("node1 stats %+v; want 2 interests, connected", s)
	}
	// Exactly once and in order again, on both channels (the restored subscriptions are not
	// doubled by the ones made during the outage).
	for _, ch := range []string{"before", "during"} {
		for i := 0; i < 100; i++ {
			publish(t, a, "app", ch, "again"+strconv.Itoa(i))
		}
		var again []string
		poll.Until(t, Wait, fmt.Sprintf("node1 to receive again0..again99 on %q", ch), func() (bool, string) {
			again = again[:0]
			for _, m := range c.rec[1].on(ch) {
				if p := string(m.Payload); strings.HasPrefix(p, "again") {
					again = append(again, p)
				}
			}
			return len(again) > 0 && again[len(again)-1] == "again99", fmt.Sprintf("%d of them", len(again))
		})
		for i, p := range again {
			if p != "again"+strconv.Itoa(i) {
				t.Fatalf("on %q after the outage message %d is %s; want again%d (%d received)", ch, i, p, i, len(again))
			}
		}
		if len(again) != 100 {
			t.Errorf("on %q after the outage received %d messages, want 100", ch, len(again))
		}
	}
}

// openFiles counts the process's open file descriptors (0 where /proc is absent).
func openFiles() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// testStartWithoutBus: brokers built while the bus server is down report it, fail
// publishes and subscribes promptly, and connect by themselves once the server is up, with
// the interests taken meanwhile in place.
func testStartWithoutBus(t *testing.T, nc NewCluster) {
	probe := start(t, nc, 1) // only to learn whether this engine has a server to stop
	if probe.Stop == nil || probe.Start == nil {
		t.Skip("this engine has no bus server to stop")
	}
	probe.Stop(t)
	restarted := false
	t.Cleanup(func() {
		if !restarted { // leave the server running for the tests after this one
			probe.Start(t)
		}
	})
	t0 := time.Now()
	c := start(t, nc, 2)
	if d := time.Since(t0); d > Wait/2 {
		t.Errorf("building brokers with the bus down took %v", d)
	}
	a, b := c.Brokers[0], c.Brokers[1]
	if a.Connected() || b.Connected() || a.Stats().Connected {
		t.Fatal("a broker reports connected with its bus server down")
	}
	err := a.Publish(context.Background(), herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "late", Payload: []byte("x")})
	if herald.CodeOf(err) != herald.CodeUnavailable {
		t.Fatalf("Publish with the bus down = %v, want a CodeUnavailable error", err)
	}
	flushDown(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	t1 := time.Now()
	err = b.Subscribe(ctx, "app", "late")
	cancel()
	if d := time.Since(t1); err == nil || d > prompt {
		t.Fatalf("Subscribe with the bus down returned %v after %v; want an error within %v", err, d, prompt)
	}
	probe.Start(t)
	restarted = true
	up := time.Now()
	poll.Until(t, Wait, "node1 to receive a message after the server started", func() (bool, string) {
		if len(c.rec[1].on("late")) > 0 {
			return true, ""
		}
		_ = a.Publish(context.Background(), herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "late", Payload: []byte("x")})
		return false, fmt.Sprintf("nothing; connected: node0 %v, node1 %v; node1 %+v", a.Connected(), b.Connected(), b.Stats())
	})
	if d := time.Since(up); d > Restore {
		t.Errorf("delivery began %v after the server answered; want within %v", d, Restore)
	}
}
