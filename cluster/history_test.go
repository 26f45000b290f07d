package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// unreadable is a History whose store cannot be read.
type unreadable struct{ herald.History }

func (unreadable) Read(context.Context, herald.HistoryRule, string, string, uint64, int) (herald.HistoryPage, error) {
	return herald.HistoryPage{}, herald.Errorf(herald.CodeUnavailable, "test: the store is down")
}

// TestHistoryUnreadable: when a history channel's history cannot be read, its gate opens all
// the same (nobody's subscription hangs), a recovery answers unavailable, and the events the
// bus brings are delivered as they come.
func TestHistoryUnreadable(t *testing.T) {
	eng := fanout.New(fanout.Config{Workers: 1, Ping: []byte("p"), Slow: fanout.Close{Frame: []byte("s")}, PongLost: fanout.Close{Frame: []byte("l")}}, nil)
	t.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	b := memory.NewBus().Attach(memory.Config{NodeID: "n"}, mux.Receive)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	r := NewReplicated(Config{}, eng, b, unreadable{memory.NewHistory(b)}, mux.Handle, nil)
	rules := []herald.HistoryRule{{Channels: "auction-*", Size: 10, TTL: time.Minute}}
	a := r.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), rules)
	r.Start(nopListener{})
	t.Cleanup(func() { r.Stop(context.Background()) })

	ch, _ := r.Acquire(a, "auction-x", herald.Classify("auction-x"))
	poll.Until(t, 30*time.Second, "the gate to open", func() (bool, string) { return ch.Gate().Open(), "shut" })
	for i := 0; i < 3; i++ {
		if err := r.Publish(a, herald.Event{Name: "bid", Channel: "auction-x", Data: "d"}, []byte("frame")); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, "the events delivered as they came", func() (bool, string) {
		var got Recovery
		a.Recover(ch, nil, func(rec Recovery) { got = rec })
		return got.Latest.Offset == 3, "latest " + got.Latest.Epoch
	})
	var got Recovery
	a.Recover(ch, &herald.Position{Epoch: "e", Offset: 1}, func(rec Recovery) { got = rec })
	if got.Recovered || got.Reason != ReasonUnavailable {
		t.Fatalf("recovery %+v, want unavailable", got)
	}
}

// TestHistoryFrameCheck: the events read from the bus's store are checked as the bus's own
// are (Config.ValidFrame): a refused one is left out of the page, whose Through says the
// missing offset is gone rather than beyond the read.
func TestHistoryFrameCheck(t *testing.T) {
	eng := fanout.New(fanout.Config{Workers: 1, Ping: []byte("p"), Slow: fanout.Close{Frame: []byte("s")}, PongLost: fanout.Close{Frame: []byte("l")}}, nil)
	t.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	b := memory.NewBus().Attach(memory.Config{NodeID: "n"}, mux.Receive)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	store := memory.NewHistory(b)
	var refused int
	valid := func(f []byte) bool {
		if f[0] == 0x81 {
			return true
		}
		refused++
		return false
	}
	r := NewReplicated(Config{ValidFrame: valid}, eng, b, store, mux.Handle, nil)
	rule := herald.HistoryRule{Channels: "auction-*", Size: 10, TTL: time.Minute}
	a := r.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), []herald.HistoryRule{rule})
	r.Start(nopListener{})
	t.Cleanup(func() { r.Stop(context.Background()) })

	good, bad := []byte("\x81\x01g"), []byte{0x88, 0x02, 0x03, 0xe8} // a close frame
	for ch, frames := range map[string][][]byte{"auction-a": {good, bad, good}, "auction-b": {bad, good}} {
		for _, f := range frames {
			if _, err := store.Publish(context.Background(), rule, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: ch, Payload: f}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for ch, want := range map[string][]uint64{"auction-a": {1, 3}, "auction-b": {2}} {
		page, err := r.History(context.Background(), a, ch, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, e := range page.Entries {
			got = append(got, e.Offset)
		}
		if !slices.Equal(got, want) || page.Through != want[len(want)-1] {
			t.Errorf("%s: entries %v through %d, want %v through %d", ch, got, page.Through, want, want[len(want)-1])
		}
	}
	if refused == 0 {
		t.Error("no frame refused")
	}
}
