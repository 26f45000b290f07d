package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/hub"
)

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAnswersPusherPing: herald pings silent clients and closes those that do not answer
// (4201); attached clients answer, so none is lost.
func TestAnswersPusherPing(t *testing.T) {
	target, _ := startHub(t, hub.Config{ActivityTimeout: 200 * time.Millisecond, PongTimeout: 300 * time.Millisecond, SweepInterval: 20 * time.Millisecond}, nil)
	l, err := subscribeHere(t.Context(), target, subSpec{Conns: 20, Channels: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	// Each client is pinged at least twice, so that the first pong is known to have counted.
	waitFor(t, 10*time.Second, "40 pings", func() bool { return l.rec.pings.Load() >= 40 })
	if n := l.p.active.Load(); n != 20 {
		t.Fatalf("%d of 20 clients still open after the pings", n)
	}
	tl, err := l.finish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tl.Lost.Count != 0 {
		t.Fatalf("lost %+v: pings were not answered", tl.Lost)
	}
}

// TestLostCountsServerClose: the server closes every connection (shutdown, 4200); each is
// counted lost once, by its close code.
func TestLostCountsServerClose(t *testing.T) {
	target, h := startHub(t, hub.Config{}, nil)
	l, err := subscribeHere(t.Context(), target, subSpec{Conns: 20, Channels: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "every client hung up", func() bool { return l.p.active.Load() == 0 })
	tl, err := l.finish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tl.Lost.Count != 20 || tl.Lost.ByCode[4200] != 20 || !strings.Contains(tl.Lost.FirstError, "4200") {
		t.Fatalf("lost %+v; want 20, all with code 4200", tl.Lost)
	}
}

// TestSeveralChannelsPerClient: each client joins three of five channels; an event on each
// channel reaches exactly its subscribers.
func TestSeveralChannelsPerClient(t *testing.T) {
	target := startHerald(t, nil)
	chans := []string{"c0", "c1", "c2", "c3", "c4"}
	spec := subSpec{Conns: 10, Channels: chans, PerClient: 3, Events: 2}
	l, err := subscribeHere(t.Context(), target, spec)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := newPublisher(target, 50, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.close()
	for seq := 1; seq <= 2; seq++ {
		if _, err := pub.trigger(t.Context(), chans, seq); err != nil {
			t.Fatal(err)
		}
	}
	if !l.rec.await(t.Context(), 5*time.Second) {
		t.Fatalf("%d of 60 deliveries", l.rec.hits.Load())
	}
	tl, err := l.finish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := tl.Delivery; d.Expected != 60 || d.Delivered != 60 || d.Received != 60 || !d.Clean() {
		t.Fatalf("delivery %+v; want 10 clients × 3 channels × 2 events, clean", d)
	}
	if n := tl.Latency.summary().Count; n != 60 {
		t.Fatalf("%d latencies; want 60", n)
	}
}
