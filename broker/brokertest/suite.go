package brokertest

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// Run runs every case of the contract against clusters built by newCluster. The outage
// cases run last, and only when the factory's clusters can stop and start their server.
func Run(t *testing.T, newCluster NewCluster) {
	cases := []struct {
		name string
		fn   func(*testing.T, NewCluster)
	}{
		{"InterestRouting", testInterestRouting},
		{"SubscribeThenPublish", testSubscribeThenPublish},
		{"Unsubscribe", testUnsubscribe},
		{"Echo", testEcho},
		{"Order", testOrder},
		{"Drained", testDrained},
		{"Losses", testLosses},
		{"ConcurrentPublishers", testConcurrentPublishers},
		{"ChannelNames", testChannelNames},
		{"LargePayload", testLargePayload},
		{"Origin", testOrigin},
		{"FlushOrder", testFlushOrder},
		{"FlushConcurrent", testFlushConcurrent},
		{"FlushDeadline", testFlushDeadline},
		{"Close", testClose},
		{"Outage", testOutage},
		{"StartWithoutBus", testStartWithoutBus},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newCluster) })
	}
}

// testDrained: once the engine has handed over what it received, the handler gets a
// herald.BusDrained signal: after a burst, no message waits for one.
func testDrained(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	subscribe(t, c.Brokers[1], "app1", "burst")
	ctx := context.Background()
	for i := range 200 {
		if err := c.Brokers[0].Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app1", Channel: "burst", Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	c.rec[1].waitCount(t, "burst", 200)
	poll.Until(t, Wait, "a BusDrained signal after the last message", func() (bool, string) {
		drains, undrained := c.rec[1].drained()
		return drains > 0 && undrained == 0, fmt.Sprintf("%d signals, %d messages since the last", drains, undrained)
	})
}

// lossReporter is what every engine here implements: whose received messages it dropped.
type lossReporter interface {
	Losses(f func(app, channel string)) bool
}

// testLosses: a node whose handler is held while its receive queue overflows drops what
// does not fit, counts it, and says whose it was (Losses): the channel's, once, not the
// internal keys', whose messages (app id "") wait on a queue of their own and all arrive.
func testLosses(t *testing.T, nc NewCluster) {
	hold := make(chan struct{})
	c := startWith(t, nc, 2, 8, hold)
	lr, ok := c.Brokers[1].(lossReporter)
	if !ok {
		t.Fatalf("%T does not say whose messages it dropped (Losses)", c.Brokers[1])
	}
	subscribe(t, c.Brokers[1], "app1", "held")
	subscribe(t, c.Brokers[1], "", "internal")
	ctx := context.Background()
	for i := range 200 {
		if err := c.Brokers[0].Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app1", Channel: "held", Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, c.Brokers[0])
	for i := range 5 {
		if err := c.Brokers[0].Publish(ctx, herald.BusMessage{Kind: herald.BusState, Channel: "internal", Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, c.Brokers[0])
	poll.Until(t, Wait, "the held node to drop what its queue cannot take", func() (bool, string) {
		st := c.Brokers[1].Stats()
		return st.Dropped > 0, fmt.Sprintf("%d dropped", st.Dropped)
	})
	close(hold)
	c.rec[1].waitCount(t, "internal", 5)
	var lost []string
	var before uint64 // drops counted before the Losses that named the channel
	poll.Until(t, Wait, "Losses to name the held channel", func() (bool, string) {
		before = c.Brokers[1].Stats().Dropped
		if !lr.Losses(func(app, channel string) { lost = append(lost, app+"/"+channel) }) {
			t.Fatal("Losses could not say whose messages were dropped (2 keys)")
		}
		return len(lost) > 0, fmt.Sprint(lost)
	})
	if len(lost) != 1 || lost[0] != "app1/held" {
		t.Fatalf("Losses named %v, want [app1/held]", lost)
	}
	poll.Until(t, Wait, "every message of the held channel received or dropped", func() (bool, string) {
		got, dropped := len(c.rec[1].on("held")), int(c.Brokers[1].Stats().Dropped)
		if got+dropped > 200 || got >= 200 {
			t.Fatalf("received %d and dropped %d of 200 on the held channel", got, dropped)
		}
		return got+dropped == 200, fmt.Sprintf("received %d, dropped %d", got, dropped)
	})
	// Named again only for a drop after that Losses (the queue may still overflow while the
	// handler catches up on a busy machine).
	var again []string
	lr.Losses(func(app, channel string) { again = append(again, app+"/"+channel) })
	if after := c.Brokers[1].Stats().Dropped; len(again) > 0 && after == before {
		t.Errorf("Losses named %v again with no drop since it named them (%d dropped)", again, after)
	}
}

// testInterestRouting: only nodes with interest receive, and the counters say so.
func testInterestRouting(t *testing.T, nc NewCluster) {
	c := start(t, nc, 3)
	a, b, idle := c.Brokers[0], c.Brokers[1], c.Brokers[2]
	subscribe(t, b, "app1", "routed")
	subscribe(t, idle, "app1", "marker")
	subscribe(t, idle, "app2", "routed") // same channel name, other app
	for i := 0; i < 10; i++ {
		publish(t, a, "app1", "routed", "m"+strconv.Itoa(i))
	}
	got := c.rec[1].waitCount(t, "routed", 10)
	for _, m := range got {
		if m.App != "app1" || m.Node != "node0" || m.Kind != herald.BusEvent {
			t.Errorf("node1 received %+v; want app1/routed from node0, kind BusEvent", m)
		}
	}
	publish(t, a, "app1", "marker", "end")
	c.rec[2].waitCount(t, "marker", 1)
	if seen := c.rec[2].snapshot(); len(seen) != 1 {
		t.Errorf("node2 has no interest in app1/routed but received %d messages: %s", len(seen), summary(seen))
	}
	poll.Until(t, Wait, "the received counters to match (node1: 10, node2: 1)", func() (bool, string) {
		s1, s2 := b.Stats(), idle.Stats()
		return s1.MessagesReceived == 10 && s2.MessagesReceived == 1 && s1.BytesReceived > 0,
			fmt.Sprintf("node1 %+v, node2 %+v", s1, s2)
	})
	if s := a.Stats(); s.MessagesSent != 11 || s.BytesSent == 0 || s.PublishErrors != 0 || !s.Connected {
		t.Errorf("publisher stats %+v; want 11 messages sent, bytes counted, no errors, connected", s)
	}
	if s := idle.Stats(); s.Interests != 2 {
		t.Errorf("node2 Interests = %d, want 2", s.Interests)
	}
}

// testSubscribeThenPublish: once Subscribe returns, a publish from another node is received.
func testSubscribeThenPublish(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	const n = 200
	for i := 0; i < n; i++ {
		ch := "fresh-" + strconv.Itoa(i)
		subscribe(t, c.Brokers[1], "app", ch)
		publish(t, c.Brokers[0], "app", ch, "first")
	}
	poll.Until(t, Wait, fmt.Sprintf("node1 to receive the first publish on each of %d channels it had just subscribed to", n),
		func() (bool, string) {
			got := c.rec[1].snapshot()
			return len(got) == n, fmt.Sprintf("%d messages", len(got))
		})
	// Concurrent subscribers of one channel all wait until it is in place.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); subscribe(t, c.Brokers[1], "app", "shared") }()
	}
	wg.Wait()
	publish(t, c.Brokers[0], "app", "shared", "x")
	c.rec[1].waitCount(t, "shared", 1)
	if s := c.Brokers[1].Stats(); s.Interests != n+1 {
		t.Errorf("Interests = %d, want %d", s.Interests, n+1)
	}
}

// testOrigin: a message's origin time reaches every receiver, the publisher included, as it
// was sent; a message without one arrives without one.
func testOrigin(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	for _, b := range c.Brokers {
		subscribe(t, b, "app", "timed")
	}
	origins := []int64{1_764_000_000_123_456_789, 0, -5}
	ctx, cancel := ctxWait()
	defer cancel()
	for i, o := range origins {
		m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "timed", Origin: o, Payload: []byte{byte('a' + i)}}
		if err := c.Brokers[0].Publish(ctx, m); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	for n := range c.Brokers {
		got := c.rec[n].waitCount(t, "timed", len(origins))
		for i, m := range got {
			if m.Origin != origins[i] || string(m.Payload) != string(rune('a'+i)) {
				t.Errorf("node%d message %d: origin %d payload %q, want %d %q", n, i, m.Origin, m.Payload, origins[i], string(rune('a'+i)))
			}
		}
	}
}

// testUnsubscribe: interest is counted; the last Unsubscribe stops delivery.
func testUnsubscribe(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	a, b := c.Brokers[0], c.Brokers[1]
	subscribe(t, b, "app", "gone")
	subscribe(t, b, "app", "gone")
	subscribe(t, b, "app", "stays")
	unsubscribe(t, b, "app", "gone") // one reference left
	publish(t, a, "app", "gone", "1")
	c.rec[1].waitCount(t, "gone", 1)
	unsubscribe(t, b, "app", "gone")
	if s := b.Stats(); s.Interests != 1 {
		t.Errorf("Interests = %d after the last Unsubscribe of one of two channels, want 1", s.Interests)
	}
	publish(t, a, "app", "gone", "2")
	publish(t, a, "app", "stays", "marker")
	c.rec[1].waitCount(t, "stays", 1)
	if got := c.rec[1].on("gone"); len(got) != 1 {
		t.Errorf("node1 received %d messages on a channel it left; want only the one before: %s", len(got), summary(got))
	}
	// An Unsubscribe without a Subscribe changes nothing.
	unsubscribe(t, b, "app", "never")
	subscribe(t, b, "app", "gone")
	publish(t, a, "app", "gone", "3")
	// "3" must come, and last. "2" may come before it: on a Redis Cluster "gone" and
	// "stays" can be on different shards, so the marker above does not prove that nothing
	// of "gone" is still on its way (a fresh-clone run saw 1, 2, 3 here).
	var got []herald.BusMessage
	poll.Until(t, Wait, "node1 to receive 3 after subscribing again", func() (bool, string) {
		got = c.rec[1].on("gone")
		return string(got[len(got)-1].Payload) == "3", summary(got)
	})
	if len(got) > 3 || string(got[0].Payload) != "1" {
		t.Errorf("after subscribing again node1 received %s; want 1, then 3 (2 at most in between)", summary(got))
	}
}

// testEcho: a node with interest receives its own publishes too, once, in the same order
// as the other nodes (the bus's order); a node without interest receives nothing.
func testEcho(t *testing.T, nc NewCluster) {
	c := start(t, nc, 3)
	a, b := c.Brokers[0], c.Brokers[1]
	subscribe(t, a, "app", "echo")
	subscribe(t, b, "app", "echo")
	ctx, cancel := ctxWait()
	defer cancel()
	for i := 0; i < 50; i++ {
		p := c.Brokers[i%2]
		if err := p.Publish(ctx, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "echo", Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 2 {
		got := c.rec[n].waitCount(t, "echo", 50)
		for i, m := range got {
			if string(m.Payload) != strconv.Itoa(i) || m.Node != fmt.Sprint("node", i%2) {
				t.Fatalf("node%d message %d: %s; want payload %d from node%d", n, i, summary(got[i:i+1]), i, i%2)
			}
		}
	}
	publish(t, b, "app", "echo", "last")
	c.rec[0].waitCount(t, "echo", 51)
	c.rec[1].waitCount(t, "echo", 51)
	if got := c.rec[2].on("echo"); len(got) != 0 {
		t.Errorf("node2 (no interest) received %s", summary(got))
	}
}

// otherKind is a kind no part of herald uses: a broker carries every kind as it is.
const otherKind herald.BusKind = 200

// testOrder: 10,000 messages from one publisher on one channel arrive in order, intact.
func testOrder(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	subscribe(t, c.Brokers[1], "app", "ordered")
	const n = 10_000
	ctx, cancel := ctxWait()
	defer cancel()
	for i := 0; i < n; i++ {
		m := herald.BusMessage{Kind: otherKind, App: "app", Channel: "ordered", ExcludeSocket: "123.456",
			Payload: []byte(strconv.Itoa(i))}
		if err := c.Brokers[0].Publish(ctx, m); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
	got := c.rec[1].waitCount(t, "ordered", n)
	for i, m := range got {
		if string(m.Payload) != strconv.Itoa(i) || m.Kind != otherKind || m.ExcludeSocket != "123.456" || m.Node != "node0" {
			t.Fatalf("message %d is %+v (payload %q); want payload %d, kind %d, socket 123.456 excluded, from node0",
				i, m, m.Payload, i, otherKind)
		}
	}
	if len(got) != n {
		t.Errorf("received %d messages, want %d", len(got), n)
	}
}

// testConcurrentPublishers: four publishers on two nodes; every message arrives once, and
// each publisher's messages arrive in its order.
func testConcurrentPublishers(t *testing.T, nc NewCluster) {
	c := start(t, nc, 3)
	subscribe(t, c.Brokers[1], "app", "busy")
	const per = 2000
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		b := c.Brokers[0]
		if p%2 == 1 {
			b = c.Brokers[2]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := ctxWait()
			defer cancel()
			for i := 0; i < per; i++ {
				m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "busy", Payload: []byte(fmt.Sprintf("%d:%d", p, i))}
				if err := b.Publish(ctx, m); err != nil {
					t.Errorf("publisher %d, message %d: %v", p, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := c.rec[1].waitCount(t, "busy", 4*per)
	next := map[string]int{}
	for _, m := range got {
		pub, seq, _ := strings.Cut(string(m.Payload), ":")
		if strconv.Itoa(next[pub]) != seq {
			t.Fatalf("publisher %s: got message %s, want %d", pub, seq, next[pub])
		}
		next[pub]++
	}
	if len(got) != 4*per {
		t.Errorf("received %d, want %d", len(got), 4*per)
	}
}

// testChannelNames: every character a Pusher channel name may hold, the longest name, and
// app ids that are not plain.
func testChannelNames(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	long := strings.Repeat("a.b-c_d=e@f,g;", 12)[:160] + ".end"
	names := [][2]string{
		{"app", "private-a.b.c"}, {"app", "presence-x@y=z;w,v"}, {"app", "a_b-c=d@e,f;g.h"},
		{"app", herald.UserChannelPrefix + "u.1"}, {"app", "."}, {"app", "a..b"}, {"app", "a.b"}, {"app", "a"},
		{"app", "private-encrypted-cache-x"}, {"app", long}, {"app.1", "b"}, {"app", "1.b"}, {"a-p:p", "c"},
	}
	for _, n := range names {
		subscribe(t, c.Brokers[1], n[0], n[1])
	}
	for _, n := range names {
		publish(t, c.Brokers[0], n[0], n[1], n[0]+"/"+n[1])
	}
	poll.Until(t, Wait, fmt.Sprintf("node1 to receive one message on each of %d channels", len(names)), func() (bool, string) {
		got := c.rec[1].snapshot()
		return len(got) >= len(names), fmt.Sprintf("%d: %s", len(got), summary(got))
	})
	publish(t, c.Brokers[0], "app", "a", "marker")
	c.rec[1].waitCount(t, "a", 2)
	count := map[string]int{}
	for _, m := range c.rec[1].snapshot() {
		if string(m.Payload) != m.App+"/"+m.Channel && string(m.Payload) != "marker" {
			t.Errorf("message for %s/%s carries %q", m.App, m.Channel, m.Payload)
		}
		count[m.App+"/"+m.Channel]++
	}
	for _, n := range names {
		want := 1
		if n == [2]string{"app", "a"} {
			want = 2
		}
		if got := count[n[0]+"/"+n[1]]; got != want {
			t.Errorf("%s/%s: received %d messages, want %d", n[0], n[1], got, want)
		}
	}
}

// testLargePayload: 100 KB payloads arrive intact.
func testLargePayload(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	subscribe(t, c.Brokers[1], "app", "big")
	want := make([][]byte, 10)
	for i := range want {
		want[i] = bytes.Repeat([]byte{byte('a' + i)}, 100<<10)
		publish(t, c.Brokers[0], "app", "big", string(want[i]))
	}
	got := c.rec[1].waitCount(t, "big", len(want))
	for i := range want {
		if !bytes.Equal(got[i].Payload, want[i]) {
			t.Errorf("payload %d: %d bytes, first %q; want %d bytes of %q", i, len(got[i].Payload),
				got[i].Payload[:min(8, len(got[i].Payload))], len(want[i]), want[i][0])
		}
	}
}

// testClose: Close stops every goroutine, is idempotent, and later calls fail.
func testClose(t *testing.T, nc NewCluster) {
	base := runtime.NumGoroutine()
	c := start(t, nc, 3)
	for i, b := range c.Brokers {
		subscribe(t, b, "app", "c"+strconv.Itoa(i))
		publish(t, b, "app", "c"+strconv.Itoa((i+1)%3), "x")
	}
	c.rec[0].waitCount(t, "c0", 1)
	for _, b := range c.Brokers {
		ctx, cancel := context.WithTimeout(context.Background(), Wait)
		start := time.Now()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v after %v", err, time.Since(start))
		}
		if err := b.Close(ctx); err != nil {
			t.Errorf("second Close: %v", err)
		}
		cancel()
	}
	b := c.Brokers[0]
	if err := b.Publish(context.Background(), herald.BusMessage{App: "app", Channel: "c1"}); err == nil {
		t.Error("Publish after Close returned nil")
	}
	if err := b.Flush(context.Background()); herald.CodeOf(err) != herald.CodeUnavailable {
		t.Errorf("Flush after Close returned %v; want a CodeUnavailable error", err)
	}
	if b.Connected() {
		t.Error("Connected after Close")
	}
	poll.Until(t, Wait, fmt.Sprintf("the goroutines to return to %d after Close", base), func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= base, fmt.Sprintf("%d goroutines", n)
	})
}
