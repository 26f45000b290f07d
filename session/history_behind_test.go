package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/session"
)

// unreadableStore is a history store that cannot be read (its server is down).
type unreadableStore struct{ herald.History }

func (unreadableStore) Read(context.Context, herald.HistoryRule, string, string, uint64, int) (herald.HistoryPage, error) {
	return herald.HistoryPage{}, herald.Errorf(herald.CodeUnavailable, "test: the store is down")
}

// TestHistoryRecoverOnANodeThatStaysBehind: a client that recovers on a node that cannot
// reach its position (its store cannot be read, and the bus brings it only the channel's
// first event) is not answered with the node's older position, which it would take, and then
// be given again the events between: once the wait is over, its connection is closed with
// 4200, so that it reconnects and recovers, here or elsewhere, from its own position. On a
// node that has had no event of the channel at all in that time, it is answered unavailable
// with its own position, which it keeps.
func TestHistoryRecoverOnANodeThatStaysBehind(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep uint64 // the node gets the channel's events up to this offset
	}{{"behind", 1}, {"quiet", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			bus := memory.NewBus()
			n0, _ := startLossyNode(t, bus, "node-0", func(herald.BusMessage) bool { return false }, historyApp)
			mux := new(broker.Mux)
			b := bus.Attach(memory.Config{NodeID: "node-1"}, func(m herald.BusMessage) {
				if m.Kind == herald.BusEvent && m.Offset > tc.keep {
					return
				}
				mux.Receive(m)
			})
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			h1, addr1 := serveNode(t, session.Config{}, func(eng *fanout.Engine) cluster.State {
				return cluster.NewReplicated(cluster.Config{CatchUpWait: 500 * time.Millisecond}, eng, b, unreadableStore{memory.NewHistory(b)}, mux.Handle, nil)
			}, historyApp)
			n1 := &node{h: h1, addr: addr1, b: b}

			// A subscriber on node 1 makes it take the channel's events from the bus; its
			// copy cannot be read from the store, so it knows no position yet: none is given.
			k, _ := dial(t, n1)
			if _, _, rec := subscribeRecover(t, k, "auction-behind", nil); rec.Epoch != "" || rec.Recovered != nil {
				t.Fatalf("subscribing on the node without a readable history: %+v, want no position", rec)
			}
			c, _ := dial(t, n0)
			subscribeRecover(t, c, "auction-behind", nil)
			var last position
			for i := 1; i <= 3; i++ {
				if err := n0.h.Publish("app-id", herald.Event{Name: "bid", Channel: "auction-behind", Data: "d"}); err != nil {
					t.Fatal(err)
				}
				m, err := c.Expect("pusher_internal:position", patience)
				if err != nil {
					t.Fatal(err)
				}
				last = decodePosition(t, m)
			}
			c.Close()
			if tc.keep > 0 {
				if _, err := k.Expect("pusher_internal:position", patience); err != nil {
					t.Fatal(err)
				}
			}

			c, _ = dial(t, n1)
			if err := c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": map[string]any{
				"channel": "auction-behind", "recover": map[string]any{"epoch": last.Epoch, "offset": last.Offset}}}); err != nil {
				t.Fatal(err)
			}
			var seen []string
			for {
				m, err := c.Read(patience)
				if err != nil {
					t.Fatalf("after %v: %v", seen, err)
				}
				if m.Close != 0 {
					if tc.keep == 0 || m.Close != 4200 {
						t.Fatalf("closed with %d after %v", m.Close, seen)
					}
					break
				}
				seen = append(seen, m.Event+" "+m.DataString())
				if m.Event != "pusher_internal:recovery" {
					continue
				}
				rec := decodePosition(t, m)
				if tc.keep > 0 || rec.Epoch != last.Epoch || rec.Offset != last.Offset || rec.Recovered == nil || *rec.Recovered || rec.Reason != "unavailable" {
					t.Fatalf("the node that could not reach the client's position %v answered: %v", last, seen)
				}
				break
			}
			if got, want := h1.Recoveries()[len(session.RecoveryReasons)-1], min(tc.keep, 1); got != int64(want) {
				t.Errorf("recoveries counted behind: %d, want %d", got, want)
			}
		})
	}
}
