package ingest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// reconnectingStub is a publisherStub whose bus connection the test replaces.
type reconnectingStub struct {
	publisherStub
	conn atomic.Uint64
}

func (r *reconnectingStub) Connection() uint64 { return r.conn.Load() }

// seqs is the seq of each event's data, in order.
func seqs(evs []herald.Event) []int {
	out := make([]int, len(evs))
	for i, ev := range evs {
		var sym string
		if _, err := fmt.Sscanf(ev.Data, `{"symbol":%q,"seq":%d}`, &sym, &out[i]); err != nil {
			out[i] = -1
		}
	}
	return out
}

// TestResendAfterReconnect: once the publisher's connection is replaced, the events handed
// off on the lost one within ResendWindow before its last hand-off are handed off again, in
// order, before the next, in one Publish; then never again.
func TestResendAfterReconnect(t *testing.T) {
	pub := &reconnectingStub{}
	p := newPipeline(t, pub, nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := p.Handle(ctx, []Record{trade("A", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The first hand-off is older than the window before the last.
	p.sent.ring[p.sent.index(0)].at -= int64(2 * ResendWindow)
	pub.conn.Add(1)
	if _, err := p.Handle(ctx, []Record{trade("A", 3)}); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(seqs(pub.events())), "[0 1 2 1 2 3]"; got != want {
		t.Errorf("handed off %s, want %s", got, want)
	}
	if pub.calls != 4 {
		t.Errorf("%d publishes, want 4 (the events handed off again go with the next)", pub.calls)
	}
	if _, err := p.Handle(ctx, []Record{trade("A", 4)}); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(seqs(pub.events())), "[0 1 2 1 2 3 4]"; got != want {
		t.Errorf("handed off %s, want %s", got, want)
	}
	if st := p.Stats(); st.Published != 5 || st.Resent != 2 {
		t.Errorf("published %d resent %d, want 5 and 2", st.Published, st.Resent)
	}
}

// TestResendBounds: at most ResendEvents and ResendBytes are kept, and none handed off more
// than ResendAge ago is handed off again.
func TestResendBounds(t *testing.T) {
	pub := &reconnectingStub{}
	p := newPipeline(t, pub, nil)
	ctx := context.Background()
	recs := make([]Record, ResendEvents+10)
	for i := range recs {
		recs[i] = trade("A", i)
	}
	if _, err := p.Handle(ctx, recs); err != nil {
		t.Fatal(err)
	}
	pub.conn.Add(1)
	if err := p.handoff(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got := seqs(pub.events())[len(recs):]
	if len(got) != ResendEvents || got[0] != 10 || got[len(got)-1] != len(recs)-1 {
		t.Errorf("handed off again %d events, %v to %v; want %d, 10 to %d", len(got), got[0], got[len(got)-1], ResendEvents, len(recs)-1)
	}

	for i := range p.sent.n {
		p.sent.ring[p.sent.index(i)].at -= int64(ResendAge + time.Second)
	}
	n := len(pub.events())
	pub.conn.Add(1)
	if err := p.handoff(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(pub.events()) != n {
		t.Errorf("an event handed off more than ResendAge ago was handed off again")
	}

	big := make([]herald.Event, 10) // larger than a session server takes: the bound is the pipeline's
	for i := range big {
		big[i] = herald.Event{Name: "trade", Channel: "A", Data: strings.Repeat("x", ResendBytes/4)}
	}
	p.sent.keep(big, 0, time.Now().UnixNano())
	if p.sent.n != 3 || p.sent.bytes > ResendBytes {
		t.Errorf("kept %d events of %d bytes, want the last 3 (ResendBytes %d)", p.sent.n, p.sent.bytes, ResendBytes)
	}
}

// TestResendWhileIdle: a source that hands nothing off gets what the lost connection may
// have lost handed off again all the same (the lifecycle's watch), and a publisher refusing
// it meanwhile (its bus not back yet) only delays it.
func TestResendWhileIdle(t *testing.T) {
	pub := &reconnectingStub{}
	p := newPipeline(t, pub, nil)
	l, _ := NewLifecycle(p, nil)
	l.Start()
	defer l.Close(context.Background())
	if _, err := p.Handle(context.Background(), []Record{trade("A", 0), trade("A", 1)}); err != nil {
		t.Fatal(err)
	}
	pub.mu.Lock()
	pub.refuse = 2
	pub.mu.Unlock()
	pub.conn.Add(1)
	poll.Until(t, 10*time.Second, "the events handed off again", func() (bool, string) {
		got := fmt.Sprint(seqs(pub.events()))
		return got == "[0 1 0 1]", got
	})
}

// TestNoResendWithoutReconnector: a publisher that is no Reconnector keeps nothing.
func TestNoResendWithoutReconnector(t *testing.T) {
	p := newPipeline(t, &publisherStub{}, nil)
	if _, err := p.Handle(context.Background(), []Record{trade("A", 0)}); err != nil {
		t.Fatal(err)
	}
	if p.sent.ring != nil {
		t.Error("the pipeline kept events for a publisher that is no Reconnector")
	}
}
