package cluster

import (
	"context"
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
