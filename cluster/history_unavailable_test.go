package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// lostCounter is a Listener that counts the channels whose subscribers it was told to close.
type lostCounter struct {
	nopListener
	lost atomic.Int64
}

func (l *lostCounter) Lost(string, *Channel) { l.lost.Add(1) }

// unavailableCopy starts a node whose store cannot be read and acquires a history channel on
// it, whose copy is then unavailable.
func unavailableCopy(t *testing.T, cfg Config) (*Replicated, *App, *Channel, *lostCounter) {
	t.Helper()
	return copyOn(t, cfg, func(b *memory.Broker) herald.History { return unreadable{memory.NewHistory(b)} })
}

// copyOn starts a node whose history store is store's and acquires a history channel
// (rule auction-*, 10 events, a minute) on it, once its gate is open.
func copyOn(t *testing.T, cfg Config, store func(*memory.Broker) herald.History) (*Replicated, *App, *Channel, *lostCounter) {
	t.Helper()
	eng := fanout.New(fanout.Config{Workers: 1, Ping: []byte("p"), Slow: fanout.Close{Frame: []byte("s")}, PongLost: fanout.Close{Frame: []byte("l")}}, nil)
	t.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	b := memory.NewBus().Attach(memory.Config{NodeID: "n"}, mux.Receive)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	r := NewReplicated(cfg, eng, b, store(b), mux.Handle, nil)
	a := r.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), []herald.HistoryRule{historyRule})
	l := new(lostCounter)
	r.Start(l)
	t.Cleanup(func() { r.Stop(context.Background()) })
	ch, _ := r.Acquire(a, "auction-x", herald.Classify("auction-x"))
	poll.Until(t, 30*time.Second, "the gate to open", func() (bool, string) { return ch.Gate().Open(), "shut" })
	return r, a, ch, l
}

var historyRule = herald.HistoryRule{Channels: "auction-*", Size: 10, TTL: time.Minute}

// bring has the bus bring r the event frame of auction-x at epoch/off.
func bring(r *Replicated, a *App, epoch string, off uint64, frame string) {
	r.receiveHistory(a, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "auction-x", Epoch: epoch, Offset: off, Payload: []byte(frame)})
}

func recoverNow(a *App, ch *Channel, since *herald.Position) Recovery {
	var got Recovery
	a.Recover(ch, since, func(rec Recovery) { got = rec })
	return got
}

// TestHistoryUnavailableGivesNoPosition: a copy that cannot read its store and has had no
// event knows no position. It must not answer {"", 0}, which is a position (before the
// channel's first event): a client that took it would later recover the whole history, the
// events it had among them. A recovering client keeps its own; another is given none.
func TestHistoryUnavailableGivesNoPosition(t *testing.T) {
	_, a, ch, _ := unavailableCopy(t, Config{})
	if got := recoverNow(a, ch, nil); !got.Unknown || got.Asked {
		t.Errorf("subscription without recovery got %+v, want no position (Unknown)", got)
	}
	since := herald.Position{Epoch: "e1", Offset: 7}
	got := recoverNow(a, ch, &since)
	if !got.Unknown || got.Recovered || got.Reason != ReasonUnavailable || got.Latest != since {
		t.Errorf("recovery from %v got %+v, want unavailable with its own position", since, got)
	}
}

// TestHistoryUnavailablePass: an unavailable copy delivers the bus's events as they come, but
// never one twice, and never past a gap, a fork or a new epoch without closing the channel's
// subscribers here first, so that they recover and are told.
func TestHistoryUnavailablePass(t *testing.T) {
	r, a, ch, l := unavailableCopy(t, Config{})
	ev := func(epoch string, off uint64, frame string) { bring(r, a, epoch, off, frame) }
	check := func(step string, want herald.Position, lost, dups int64) {
		t.Helper()
		got := recoverNow(a, ch, nil)
		if got.Latest != want || got.Unknown || l.lost.Load() != lost || r.histStats.Duplicates.Load() != dups {
			t.Fatalf("%s: latest %v (unknown %v), %d closes, %d duplicates; want %v, %d, %d",
				step, got.Latest, got.Unknown, l.lost.Load(), r.histStats.Duplicates.Load(), want, lost, dups)
		}
	}
	ev("e1", 1, "a")
	ev("e1", 2, "b")
	ev("e1", 3, "c")
	check("in order", herald.Position{Epoch: "e1", Offset: 3}, 0, 0)
	ev("e1", 2, "b")
	check("a duplicate", herald.Position{Epoch: "e1", Offset: 3}, 0, 1)
	ev("e1", 3, "x")
	check("another event at an offset delivered", herald.Position{Epoch: "e1", Offset: 3}, 1, 1)
	ev("e1", 6, "f")
	check("past a gap", herald.Position{Epoch: "e1", Offset: 6}, 2, 1)
	ev("e2", 1, "g")
	check("a new epoch", herald.Position{Epoch: "e2", Offset: 1}, 3, 1)
	ev("e1", 7, "h")
	check("the old epoch's late event", herald.Position{Epoch: "e2", Offset: 1}, 3, 2)
}

// TestHistoryUnavailableCatchUp: a client recovering on a node whose copy is unavailable and
// behind the client's position, or has no epoch yet, waits until the bus's events bring the
// copy to its position, so that it is not given the events it had again.
func TestHistoryUnavailableCatchUp(t *testing.T) {
	r, a, ch, _ := unavailableCopy(t, Config{})
	var entered, caughtUp atomic.Bool
	since := herald.Position{Epoch: "e1", Offset: 2}
	if !r.CatchUp(a, ch, &since, func(ok bool) { caughtUp.Store(ok); entered.Store(true) }) {
		t.Fatal("a client ahead of a copy without epoch entered at once")
	}
	bring(r, a, "e1", 1, "a")
	time.Sleep(200 * time.Millisecond) // a negative check: nothing may happen meanwhile
	if entered.Load() {
		t.Fatal("entered before the copy reached the client's position")
	}
	bring(r, a, "e1", 2, "b")
	poll.Until(t, 30*time.Second, "the client to enter", func() (bool, string) { return entered.Load(), "waiting" })
	if !caughtUp.Load() {
		t.Error("entered as not caught up")
	}
	got := recoverNow(a, ch, &since)
	if got.Latest != since || got.Reason != ReasonUnavailable {
		t.Errorf("recovery got %+v, want unavailable at the client's position", got)
	}
	if r.CatchUp(a, ch, &since, func(bool) {}) {
		t.Error("a client at the copy's position waits")
	}
}

// TestHistoryCatchUpGivesUp: a copy that does not reach the client's position within
// Config.CatchUpWait ends the wait as not caught up, so that the client is not answered with
// the copy's older position (it would take it, and be given again the events between).
func TestHistoryCatchUpGivesUp(t *testing.T) {
	r, a, ch, _ := unavailableCopy(t, Config{CatchUpWait: 300 * time.Millisecond})
	bring(r, a, "e1", 1, "a")
	result := make(chan bool, 1)
	since := herald.Position{Epoch: "e1", Offset: 5}
	if !r.CatchUp(a, ch, &since, func(ok bool) { result <- ok }) {
		t.Fatal("a client ahead of the copy entered at once")
	}
	select {
	case ok := <-result:
		if ok {
			t.Error("the wait ended as caught up, the copy still behind the client")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end")
	}
}

// flaky is a History whose store cannot be read while down is set.
type flaky struct {
	herald.History
	down atomic.Bool
}

func (f *flaky) Read(ctx context.Context, rule herald.HistoryRule, app, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	if f.down.Load() {
		return herald.HistoryPage{}, herald.Errorf(herald.CodeUnavailable, "test: the store is down")
	}
	return f.History.Read(ctx, rule, app, channel, after, limit)
}

// TestHistoryUnavailableThenRead: when an unavailable copy's store can be read again, the
// read may be older than what the copy delivered meanwhile (events that reached the bus while
// the read was on its way): the copy keeps those after the read's, so that it neither goes
// back to an older position nor delivers them again.
func TestHistoryUnavailableThenRead(t *testing.T) {
	var store *flaky
	r, a, ch, l := copyOn(t, Config{}, func(b *memory.Broker) herald.History {
		store = &flaky{History: memory.NewHistory(b)}
		store.down.Store(true)
		return store
	})

	// Two events in the store, and the bus brings three: the third is not stored yet when
	// the store can be read again.
	var epoch string
	for i := 0; i < 2; i++ {
		p, err := store.History.Publish(context.Background(), historyRule, herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "auction-x", Payload: []byte{'a' + byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		epoch = p.Epoch
	}
	ev := func(off uint64, frame string) { bring(r, a, epoch, off, frame) }
	ev(1, "a")
	ev(2, "b")
	ev(3, "c")
	store.down.Store(false)
	poll.Until(t, 30*time.Second, "the store read again", func() (bool, string) {
		got := recoverNow(a, ch, &herald.Position{Epoch: epoch, Offset: 1})
		return got.Recovered, got.Reason
	})
	got := recoverNow(a, ch, nil)
	if got.Latest != (herald.Position{Epoch: epoch, Offset: 3}) {
		t.Fatalf("after the read: latest %v, want %s/3 (the event delivered while unavailable kept)", got.Latest, epoch)
	}
	dups := r.histStats.Duplicates.Load()
	ev(3, "c") // the bus brings it again
	if r.histStats.Duplicates.Load() != dups+1 {
		t.Fatalf("the event delivered while unavailable came again and was not dropped as a duplicate (%d duplicates)", r.histStats.Duplicates.Load())
	}
	ev(4, "d")
	if got := recoverNow(a, ch, &herald.Position{Epoch: epoch, Offset: 2}); !got.Recovered || got.Len() != 2 || got.Latest.Offset != 4 || l.lost.Load() != 0 {
		t.Fatalf("recovery from 2: %+v (%d events), %d closes; want recovered, 2 events, latest 4, none closed", got, got.Len(), l.lost.Load())
	}
}
