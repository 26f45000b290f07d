package historytest

import (
	"testing"

	"github.com/herald-rt/herald"
)

// testEpochStable: a channel's epoch stays the same across publishes from every node, and for
// a new History on the same store, which goes on from the same offset.
func testEpochStable(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	if c.Reopen == nil {
		t.Fatal("the factory gave no Reopen")
	}
	a := publish(t, c.Histories[0], rule, event("app", "stable", "m1"))
	b := publish(t, c.Histories[1], rule, event("app", "stable", "m2"))
	if b != (herald.Position{Epoch: a.Epoch, Offset: 2}) {
		t.Fatalf("second publish, from another node: %+v; want offset 2 of epoch %q", b, a.Epoch)
	}
	again := c.Reopen(t, 0)
	if page := read(t, again, rule, "app", "stable", 0, 10); page.Latest != b {
		t.Errorf("a new History reads Latest %+v, want %+v", page.Latest, b)
	}
	if p := publish(t, again, rule, event("app", "stable", "m3")); p != (herald.Position{Epoch: a.Epoch, Offset: 3}) {
		t.Errorf("a new History's publish: %+v; want offset 3 of epoch %q", p, a.Epoch)
	}
	checkEntries(t, "Read after the new History's publish", read(t, c.Histories[1], rule, "app", "stable", 0, 10), 1, 3, numbered)
}

// testEpochLost: when the store loses its data, a Read finds no history (the zero Latest) and
// creates none; the next publish starts a new epoch at offset 1.
func testEpochLost(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	if c.Lose == nil {
		t.Fatal("the factory gave no Lose")
	}
	var old herald.Position
	for i := 0; i < 3; i++ {
		old = publish(t, c.Histories[i%2], rule, event("app", "lost", "x"))
	}
	c.Lose(t)
	for range 2 {
		if page := read(t, c.Histories[1], rule, "app", "lost", 0, 10); page.Latest != (herald.Position{}) || len(page.Entries) != 0 {
			t.Fatalf("Read after the data was lost: %+v; want the zero Latest and no entries", page)
		}
	}
	p := publish(t, c.Histories[0], rule, event("app", "lost", "m1"))
	if p.Offset != 1 || p.Epoch == old.Epoch {
		t.Fatalf("first publish after the data was lost: %+v; want offset 1 of an epoch other than %q", p, old.Epoch)
	}
	q := publish(t, c.Histories[1], rule, event("app", "lost", "m2"))
	if q != (herald.Position{Epoch: p.Epoch, Offset: 2}) {
		t.Errorf("second publish after the data was lost: %+v; want offset 2 of epoch %q", q, p.Epoch)
	}
	page := read(t, c.Histories[0], rule, "app", "lost", 0, 10)
	if page.Latest != q {
		t.Errorf("Latest %+v, want %+v", page.Latest, q)
	}
	checkEntries(t, "Read in the new epoch", page, 1, 2, numbered)
}
