package historytest

import (
	"context"
	"sync"
	"testing"

	"github.com/herald-rt/herald"
)

// restarter is a History that can end a channel's epoch, which a cluster node asks for when
// the store went back within it (cluster's restarter): broker/redis's and broker/nats's.
type restarter interface {
	Restart(ctx context.Context, rule herald.HistoryRule, app, channel, epoch string) (herald.Position, error)
}

// testRestart: two nodes ending a channel's epoch at once agree on one new epoch, which
// starts empty (no entry, offset 0); a publish from a node that knew the old epoch goes on at
// offset 1 of the new one; ending the old epoch again, or any epoch the channel no longer
// has, changes nothing and answers the channel's position. (With OffsetIDs only the first
// part.)
func testRestart(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	rs := make([]restarter, 2)
	for i, h := range c.Histories {
		r, ok := h.(restarter)
		if !ok {
			t.Skip("this History cannot end an epoch (no Restart)")
		}
		rs[i] = r
	}
	var old herald.Position
	for i := range 3 {
		old = publish(t, c.Histories[i%2], rule, event("app", "restart", "x"))
	}
	var wg sync.WaitGroup
	got := make([]herald.Position, 2)
	errs := make([]error, 2)
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := ctxWait()
			defer cancel()
			got[i], errs[i] = r.Restart(ctx, rule, "app", "restart", old.Epoch)
		}()
	}
	wg.Wait()
	for i := range rs {
		if errs[i] != nil {
			t.Fatalf("node %d's Restart: %v", i, errs[i])
		}
		if got[i].Epoch == old.Epoch || got[i].Offset != 0 {
			t.Fatalf("node %d's Restart of epoch %q answered %+v; want another epoch (or none), at offset 0", i, old.Epoch, got[i])
		}
	}
	if got[0] != got[1] {
		t.Fatalf("the two Restarts answered %+v and %+v; want one epoch", got[0], got[1])
	}
	page := read(t, c.Histories[1], rule, "app", "restart", 0, 10)
	if page.Latest != got[0] || len(page.Entries) != 0 {
		t.Fatalf("Read after the Restart: %+v; want Latest %+v and no entries", page, got[0])
	}
	if c.OffsetIDs {
		return // publishing at offset 1 again waits for the store to forget the old offsets' IDs
	}
	p := publish(t, c.Histories[0], rule, event("app", "restart", "m1"))
	if p.Epoch == old.Epoch || p.Offset != 1 || (got[0].Epoch != "" && p.Epoch != got[0].Epoch) {
		t.Fatalf("the first publish after the Restart: %+v; want offset 1 of the new epoch (Restart answered %+v)", p, got[0])
	}
	q := publish(t, c.Histories[1], rule, event("app", "restart", "m2"))
	if q != (herald.Position{Epoch: p.Epoch, Offset: 2}) {
		t.Fatalf("the second publish after the Restart, from the other node: %+v; want offset 2 of %q", q, p.Epoch)
	}
	ctx, cancel := ctxWait()
	defer cancel()
	again, err := rs[1].Restart(ctx, rule, "app", "restart", old.Epoch)
	if err != nil || again != q {
		t.Fatalf("Restart of the old epoch again: %+v, %v; want %+v, nothing changed", again, err, q)
	}
	none, err := rs[0].Restart(ctx, rule, "app", "never-published", old.Epoch)
	if err != nil || none != (herald.Position{}) {
		t.Fatalf("Restart of a channel without history: %+v, %v; want the zero Position", none, err)
	}
	checkEntries(t, "Read after the Restarts", read(t, c.Histories[0], rule, "app", "restart", 0, 10), 1, 2,
		func(o uint64) string { return "m" + string(rune('0'+o)) })
}
