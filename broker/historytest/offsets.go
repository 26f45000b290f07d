package historytest

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// testOffsets: a channel's offsets start at 1 and go up by one, in one epoch; every node with
// interest receives each event with its position and the message as it was published; Read
// returns them, with when they were kept.
func testOffsets(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	for _, b := range c.Brokers {
		subscribe(t, b, "app", "count")
	}
	before := time.Now()
	var epoch string
	for i := 1; i <= 5; i++ {
		m := event("app", "count", "e"+strconv.Itoa(i))
		m.ExcludeSocket, m.Origin = "123.456", int64(1000+i)
		p := publish(t, c.Histories[0], rule, m)
		if i == 1 {
			epoch = p.Epoch
		}
		if p != (herald.Position{Epoch: epoch, Offset: uint64(i)}) {
			t.Fatalf("publish %d gave %+v, want offset %d in epoch %q", i, p, i, epoch)
		}
	}
	for n, r := range c.rec {
		got := r.waitCount(t, "app", "count", 5)
		for i, m := range got {
			o := uint64(i + 1)
			if m.Epoch != epoch || m.Offset != o || string(m.Payload) != "e"+strconv.Itoa(i+1) || m.Kind != herald.BusEvent ||
				m.Node != "node0" || m.ExcludeSocket != "123.456" || m.Origin != int64(1000+i+1) {
				t.Errorf("node%d message %d: %+v (payload %q); want position (%q, %d), payload e%d from node0 with its socket and origin",
					n, i, m, m.Payload, epoch, o, i+1)
			}
		}
	}
	page := read(t, c.Histories[1], rule, "app", "count", 0, 100)
	if page.Latest != (herald.Position{Epoch: epoch, Offset: 5}) {
		t.Errorf("Latest = %+v, want (%q, 5)", page.Latest, epoch)
	}
	checkEntries(t, "Read after 0", page, 1, 5, func(o uint64) string { return "e" + strconv.FormatUint(o, 10) })
	for _, e := range page.Entries {
		at := time.UnixMilli(e.At)
		if at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
			t.Errorf("entry %d kept at %v; want between %v and now", e.Offset, at, before)
		}
	}
}

// testConcurrentNodes: publishers on two nodes, several on each, publish to one channel at
// once: the offsets given are distinct and consecutive, and every node receives every event
// with the position its publisher was given (in offset order where the engine says so).
func testConcurrentNodes(t *testing.T, nc NewCluster) {
	c := start(t, nc, 3)
	for _, b := range c.Brokers {
		subscribe(t, b, "app", "busy")
	}
	const publishers, per = 4, 50
	var mu sync.Mutex
	given := map[uint64]string{} // offset -> payload
	epochs := map[string]bool{}
	var wg sync.WaitGroup
	for p := range publishers {
		h := c.Histories[p%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				payload := fmt.Sprintf("%d:%d", p, i)
				pos := publish(t, h, rule, event("app", "busy", payload))
				mu.Lock()
				if old, dup := given[pos.Offset]; dup {
					t.Errorf("offset %d given to %q and %q", pos.Offset, old, payload)
				}
				given[pos.Offset], epochs[pos.Epoch] = payload, true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	const n = publishers * per
	if len(epochs) != 1 || len(given) != n {
		t.Fatalf("%d epochs and %d distinct offsets given; want 1 epoch and %d offsets", len(epochs), len(given), n)
	}
	for o := uint64(1); o <= n; o++ {
		if _, ok := given[o]; !ok {
			t.Fatalf("offset %d not given; offsets are not consecutive from 1", o)
		}
	}
	for k, r := range c.rec {
		got := r.waitCount(t, "app", "busy", n)
		seen := map[uint64]bool{}
		for i, m := range got {
			if given[m.Offset] != string(m.Payload) || !epochs[m.Epoch] || seen[m.Offset] {
				t.Fatalf("node%d received offset %d (epoch %q) with %q; its publisher was given it for %q", k, m.Offset, m.Epoch, m.Payload, given[m.Offset])
			}
			seen[m.Offset] = true
			if c.Ordered && m.Offset != uint64(i+1) {
				t.Fatalf("node%d received offset %d as message %d; this engine delivers one channel's events in offset order", k, m.Offset, i+1)
			}
		}
	}
	page := read(t, c.Histories[2], rule, "app", "busy", 0, 2*n)
	checkEntries(t, "Read of the concurrent publishes", page, 1, n, func(o uint64) string { return given[o] })
}

// testIsolation: each (app, channel) counts its own offsets and keeps its own events, however
// the apps and channels are named.
func testIsolation(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	keys := [][2]string{{"app1", "ch"}, {"app2", "ch"}, {"app1", "ch2"}, {"app1.x", "y"}, {"app1", "x.y"}}
	for i, k := range keys {
		for j := 0; j <= i; j++ {
			publish(t, c.Histories[j%2], rule, event(k[0], k[1], fmt.Sprintf("%s/%s/%d", k[0], k[1], j+1)))
		}
	}
	for i, k := range keys {
		page := read(t, c.Histories[1], rule, k[0], k[1], 0, 100)
		if page.Latest.Offset != uint64(i+1) || page.Latest.Epoch == "" {
			t.Errorf("%s/%s: Latest %+v, want offset %d", k[0], k[1], page.Latest, i+1)
		}
		checkEntries(t, k[0]+"/"+k[1], page, 1, uint64(i+1), func(o uint64) string { return fmt.Sprintf("%s/%s/%d", k[0], k[1], o) })
	}
	if page := read(t, c.Histories[0], rule, "app3", "ch", 0, 100); page.Latest != (herald.Position{}) || len(page.Entries) != 0 {
		t.Errorf("a channel never published to: %+v; want the zero Latest and no entries", page)
	}
}

// testChannelNames: every character a Pusher channel name may hold (and some it may not),
// and names that a careless escaping would make one.
func testChannelNames(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	names := []string{"private-a.b.c", "a*b>c", "x=y@z,w;v_u-t", herald.UserChannelPrefix + "u.1", ".", "a..b", "a.b",
		"a%2Eb", "a_b", "{tag}", "presence-{x}.y", "a b:c/d", "é"}
	for _, n := range names {
		subscribe(t, c.Brokers[1], "app", n)
	}
	for i, n := range names {
		for j := 0; j <= i%3; j++ {
			publish(t, c.Histories[0], rule, event("app", n, n+"#"+strconv.Itoa(j+1)))
		}
	}
	for i, n := range names {
		want := uint64(i%3 + 1)
		got := c.rec[1].waitCount(t, "app", n, int(want))
		for j, m := range got {
			if m.Offset != uint64(j+1) || string(m.Payload) != n+"#"+strconv.Itoa(j+1) {
				t.Errorf("%q: message %d is offset %d %q", n, j, m.Offset, m.Payload)
			}
		}
		page := read(t, c.Histories[1], rule, "app", n, 0, 100)
		if page.Latest.Offset != want {
			t.Errorf("%q: Latest %+v, want offset %d", n, page.Latest, want)
		}
		checkEntries(t, strconv.Quote(n), page, 1, want, func(o uint64) string { return n + "#" + strconv.FormatUint(o, 10) })
	}
}
