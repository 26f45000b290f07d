package session_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/session"
)

// startCheckedNode starts a node of apps on bus that refuses, as forged, every event frame
// holding "forged" (cluster.Config.ValidFrame), on the bus and in the history alike.
func startCheckedNode(t *testing.T, bus *memory.Bus, id string, apps ...*herald.App) *node {
	t.Helper()
	nd := &node{}
	mux := new(broker.Mux)
	b := bus.Attach(memory.Config{NodeID: id}, mux.Receive)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	hist := memory.NewHistory(b)
	nd.b = b
	valid := func(f []byte) bool { return !bytes.Contains(f, []byte("forged")) }
	nd.h, nd.addr = serveNode(t, session.Config{}, func(eng *fanout.Engine) cluster.State {
		return cluster.NewReplicated(cluster.Config{ValidFrame: valid}, eng, b, hist, mux.Handle, nil)
	}, apps...)
	return nd
}

// TestHistoryForgedEntryNotRecovered: an event of a history channel that every node refuses
// (forged) is a gap no recovery replays around: the subscriber that was live when it came is
// closed with 4200, its recovery from before the gap, on another node, answers
// recovered:false with reason lost, a recovery from after it recovers, and the history's
// reader learns which offset is missing.
func TestHistoryForgedEntryNotRecovered(t *testing.T) {
	bus := memory.NewBus()
	n0 := startCheckedNode(t, bus, "node-0", historyApp)
	n1 := startCheckedNode(t, bus, "node-1", historyApp)
	c0, _ := join(t, n0, "auction-gap", "")
	pub := func(data string) {
		t.Helper()
		if err := n0.h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-gap", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	pub("1")
	pub("2")
	got := readHistory(t, c0, 2, 1)
	if fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("live events %v", got)
	}
	pub("forged") // offset 3, refused by every node
	pub("4")
	pub("5")
	if code, err := c0.ExpectClose(patience); err != nil || code != 4200 {
		t.Fatalf("the live subscriber when the refused event came: close %d, %v; want 4200", code, err)
	}

	page, err := n1.h.History(context.Background(), "app-id", "auction-gap", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var offs []uint64
	for _, e := range page.Entries {
		offs = append(offs, e.Offset)
	}
	if fmt.Sprint(offs) != "[1 2 4 5]" || page.Through != 5 || page.Latest.Offset != 5 {
		t.Fatalf("history read: offsets %v through %d, latest %d; want [1 2 4 5] through 5", offs, page.Through, page.Latest.Offset)
	}
	epoch := page.Latest.Epoch

	c1, _ := dial(t, n1)
	events, _, rec := subscribeRecover(t, c1, "auction-gap", &herald.Position{Epoch: epoch, Offset: 2})
	if len(events) != 0 || rec.Recovered == nil || *rec.Recovered || rec.Reason != cluster.ReasonLost || rec.Offset != 5 {
		t.Fatalf("recovering from before the refused event: replayed %v, %+v; want nothing, recovered:false, reason lost, at 5", events, rec)
	}
	c2, _ := dial(t, n1)
	events, _, rec = subscribeRecover(t, c2, "auction-gap", &herald.Position{Epoch: epoch, Offset: 3})
	if fmt.Sprint(events) != "[4 5]" || rec.Recovered == nil || !*rec.Recovered {
		t.Fatalf("recovering from the refused event's offset: replayed %v, %+v; want [4 5] recovered", events, rec)
	}
	outcomes := n1.h.Recoveries()
	for i, r := range session.RecoveryReasons {
		if r == cluster.ReasonLost && outcomes[i] != 1 {
			t.Fatalf("recoveries %v: want one lost", outcomes)
		}
	}
	pub("6")
	if got := readHistory(t, c2, 1, 6); got[0] != "6" {
		t.Fatalf("live event after the recovery: %v", got)
	}
}
