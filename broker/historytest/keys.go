package historytest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/herald-rt/herald"
)

// keyed is an event with an idempotency key.
func keyed(app, channel, payload, key string) herald.BusMessage {
	m := event(app, channel, payload)
	m.Key = key
	return m
}

// testKeys: an event with an idempotency key is kept once per channel within the key window,
// whichever node publishes it, however many publish it at once; a repeat returns the
// position of the one kept. The same key on another channel or app is another event. Where
// the engine does not keep keys across nodes (Cluster.KeysPerNode: the node's State does), each
// publish of a keyed event is kept, with its own offset: keys never cost an offset or an event.
func testKeys(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	first := publish(t, c.Histories[0], rule, keyed("app", "keys", "one", "k-1"))
	publish(t, c.Histories[1], rule, event("app", "keys", "two"))
	again := publish(t, c.Histories[1], rule, keyed("app", "keys", "one", "k-1"))
	want := []string{"one", "two"}
	if c.KeysPerNode {
		want = append(want, "one")
	} else if again != first {
		t.Errorf("the repeat of key k-1 on node1 gave %+v; want the position of the first, %+v", again, first)
	}
	checkPayloads(t, "after a repeat through another node", read(t, c.Histories[0], rule, "app", "keys", 0, 100), want)

	// Six publishers on two nodes publish one keyed event at once.
	const racers = 6
	var wg sync.WaitGroup
	pos := make([]herald.Position, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			ctx, cancel := ctxWait()
			defer cancel()
			pos[i], errs[i] = c.Histories[i%2].Publish(ctx, rule, keyed("app", "race", "once", "k-race"))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	page := read(t, c.Histories[1], rule, "app", "race", 0, 100)
	if c.KeysPerNode {
		checkPayloads(t, "after six racers, keys not kept", page, []string{"once", "once", "once", "once", "once", "once"})
	} else {
		checkPayloads(t, "after six racers", page, []string{"once"})
		for i, p := range pos {
			if p != (herald.Position{Epoch: page.Latest.Epoch, Offset: page.Entries[0].Offset}) {
				t.Errorf("racer %d was given %+v; want the kept event's position (offset %d)", i, p, page.Entries[0].Offset)
			}
		}
	}

	// The key is the channel's: another channel, another app keep their own event.
	publish(t, c.Histories[0], rule, keyed("app", "keys-other", "one", "k-1"))
	publish(t, c.Histories[0], rule, keyed("app2", "keys", "one", "k-1"))
	checkPayloads(t, "another channel with the same key", read(t, c.Histories[1], rule, "app", "keys-other", 0, 100), []string{"one"})
	checkPayloads(t, "another app with the same key", read(t, c.Histories[1], rule, "app2", "keys", 0, 100), []string{"one"})
}

// checkPayloads fails t unless page's entries carry want, in order.
func checkPayloads(t *testing.T, what string, page herald.HistoryPage, want []string) {
	t.Helper()
	got := make([]string, len(page.Entries))
	for i, e := range page.Entries {
		got[i] = string(e.Frame)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: entries %q; want %q", what, got, want)
	}
}
