package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/session"
)

// pingsPerClient returns how many pusher:ping messages each client of p has answered.
func pingsPerClient(p *pool) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := make([]int32, len(p.clients))
	for i, c := range p.clients {
		n[i] = c.pings.Load()
	}
	return n
}

// TestAnswersPusherPing: herald pings silent clients and closes those that do not answer
// (4201); attached clients answer, so none is lost.
func TestAnswersPusherPing(t *testing.T) {
	// herald pings a client again only once it has counted its pong: a second ping to every
	// client proves every client answered, however slow the machine. The pong timeout is
	// generous, so that a pong delayed by load is not a loss.
	target, _ := startServer(t, session.Config{ActivityTimeout: 200 * time.Millisecond, PongTimeout: patience, SweepInterval: 20 * time.Millisecond}, nil)
	l, err := subscribeHere(t.Context(), target, subSpec{Conns: 20, Channels: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "every one of 20 clients to answer 2 pings", func() (bool, string) {
		n := pingsPerClient(l.p)
		seen := fmt.Sprintf("pings per client %v", n)
		for _, k := range n {
			if k < 2 {
				return false, seen
			}
		}
		return len(n) == 20, seen
	})
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
// counted lost once, by its close code, and the report keeps what each had seen: when the
// close came, the last message before it, no server ping, no write since it was set up.
func TestLostCountsServerClose(t *testing.T) {
	target, h := startServer(t, session.Config{}, nil)
	start := time.Now().UnixMilli()
	l, err := subscribeHere(t.Context(), target, subSpec{Conns: 20, Channels: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "every client to hang up", func() (bool, string) {
		n := l.p.active.Load()
		return n == 0, fmt.Sprintf("%d still open", n)
	})
	tl, err := l.finish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tl.Lost.Count != 20 || tl.Lost.ByCode[4200] != 20 || !strings.Contains(tl.Lost.FirstError, "4200") {
		t.Fatalf("lost %+v; want 20, all with code 4200", tl.Lost)
	}
	after := time.Now().UnixMilli()
	if len(tl.Lost.Seen) != 20 {
		t.Fatalf("lost %d connections' last moments; want 20", len(tl.Lost.Seen))
	}
	for _, s := range tl.Lost.Seen {
		if s.Code != 4200 || s.EndMs < before || s.EndMs > after || s.RxAgo < 0 || s.RxAgo > s.EndMs-start ||
			s.PingAgo != -1 || s.TxAgo != -1 || s.Unsent != 0 {
			t.Fatalf("a lost connection's last moments %+v; want code 4200 between %d and %d, no ping, no write", s, before, after)
		}
	}
	var text strings.Builder
	writeLost(&text, tl.Lost, "subscribers")
	if !strings.Contains(text.String(), "code 4200 at ") || !strings.Contains(text.String(), "server ping none before") {
		t.Fatalf("the report says %q; want each lost connection's last moments", text.String())
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
	if !l.rec.await(t.Context(), patience) {
		t.Fatalf("waited %v for 60 deliveries; saw %d", patience, l.rec.hits.Load())
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
