package memory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
)

// TestHistoryBounded: a channel holds at most its rule's Size entries, in an array that does
// not grow with the events published, and channels whose entries have all expired are
// dropped by the sweep even when nobody reads or publishes them again.
func TestHistoryBounded(t *testing.T) {
	b := New(Config{}, func(herald.BusMessage) {})
	defer b.Close(context.Background())
	h := NewHistory(b)
	r := herald.HistoryRule{Channels: "*", Size: 3, TTL: time.Minute}
	ctx := context.Background()
	for i := range 1000 {
		ch := "c" + strconv.Itoa(i%100)
		if _, err := h.Publish(ctx, r, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: ch, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	chans := 0
	for i := range h.s.shards {
		sh := &h.s.shards[i]
		for k, c := range sh.chans {
			chans++
			if c.n != r.Size || len(c.ring) != r.Size || c.last != 10 || c.ring[c.head].Offset != 8 {
				t.Errorf("%s: %d entries in a ring of %d from offset %d to %d; want 3 from 8 to 10 in a ring of 3",
					k.Channel, c.n, len(c.ring), c.ring[c.head].Offset, c.last)
			}
		}
	}
	if chans != 100 {
		t.Fatalf("%d channels kept, want 100", chans)
	}
	later := time.Now().Add(r.TTL)
	for i := range h.s.shards {
		sh := &h.s.shards[i]
		sh.mu.Lock()
		sh.sweep(later)
		if n := len(sh.chans); n != 0 {
			t.Errorf("shard %d keeps %d channels after every entry expired", i, n)
		}
		sh.mu.Unlock()
	}
	k := broker.Key{App: "app", Channel: "c1"}
	if sh := h.s.shard(k); sh.chans[k] != nil {
		t.Error("c1 kept after the sweep")
	}
}

func TestPublishHistoryAllocations(t *testing.T) {
	b := New(Config{}, func(herald.BusMessage) {})
	defer b.Close(context.Background())
	h := NewHistory(b)
	r := herald.HistoryRule{Channels: "*", Size: 100, TTL: time.Minute}
	m := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: make([]byte, 100)}
	for range 200 { // the entries' array reaches its largest size
		_, _ = h.Publish(context.Background(), r, m)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = h.Publish(context.Background(), r, m) }); n != 0 {
		t.Errorf("History.Publish on a single node allocates %.2f times per call", n)
	}
}
