package historytest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

func numbered(o uint64) string { return "m" + strconv.FormatUint(o, 10) }

// testRead: Read returns the events after an offset, oldest first, at most limit of them,
// and the latest position whatever it returns.
func testRead(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	var p herald.Position
	for o := uint64(1); o <= 10; o++ {
		p = publish(t, c.Histories[int(o%2)], rule, event("app", "log", numbered(o)))
	}
	for _, tc := range []struct {
		after    uint64
		limit    int
		from, to uint64
	}{
		{0, 100, 1, 10}, {3, 4, 4, 7}, {7, 100, 8, 10}, {0, 1, 1, 1}, {9, 1, 10, 10},
		{10, 100, 1, 0},  // nothing after the last
		{100, 100, 1, 0}, // ahead of the channel: nothing, and no error
		{2, 0, 1, 0},     // limit 0: the latest position only
	} {
		what := fmt.Sprintf("Read after %d limit %d", tc.after, tc.limit)
		page := read(t, c.Histories[0], rule, "app", "log", tc.after, tc.limit)
		if page.Latest != p {
			t.Errorf("%s: Latest %+v, want %+v", what, page.Latest, p)
		}
		checkEntries(t, what, page, tc.from, tc.to, numbered)
	}
}

// testSize: a channel keeps its rule's Size last events; older ones are gone, and a Read
// from before them starts after the gap.
func testSize(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	small := herald.HistoryRule{Channels: "*", Size: 5, TTL: time.Hour}
	for o := uint64(1); o <= 12; o++ {
		publish(t, c.Histories[int(o%2)], small, event("app", "capped", numbered(o)))
	}
	page := read(t, c.Histories[0], small, "app", "capped", 0, 100)
	if page.Latest.Offset != 12 {
		t.Errorf("Latest %+v, want offset 12", page.Latest)
	}
	checkEntries(t, "Read after 0 of 12 events kept 5 at most", page, 8, 12, numbered)
	checkEntries(t, "Read after 9", read(t, c.Histories[1], small, "app", "capped", 9, 100), 10, 12, numbered)
	checkEntries(t, "Read after 3 limit 2", read(t, c.Histories[1], small, "app", "capped", 3, 2), 8, 9, numbered)
}

// testTTL: an event is not returned once its rule's TTL has passed since it was kept, and
// not before; when every event of a channel has expired, the next one is either the next
// offset of the same epoch or the first of a new epoch.
func testTTL(t *testing.T, nc NewCluster) {
	c := start(t, nc, 2)
	short := herald.HistoryRule{Channels: "*", Size: 100, TTL: 1500 * time.Millisecond}
	const margin = 50 * time.Millisecond // Unix milliseconds round the time an event is kept
	sent1 := time.Now()
	first := publish(t, c.Histories[0], short, event("app", "fleeting", "m1"))
	checkEntries(t, "Read at once", read(t, c.Histories[1], short, "app", "fleeting", 0, 100), 1, 1, numbered)
	// The second event is kept about half a TTL after the first (this is pacing, not a wait
	// for an event: the polls below have their deadlines).
	time.Sleep(short.TTL / 2)
	sent2 := time.Now()
	publish(t, c.Histories[1], short, event("app", "fleeting", "m2"))

	poll.Until(t, Wait, "the first event to expire", func() (bool, string) {
		page := read(t, c.Histories[0], short, "app", "fleeting", 0, 100)
		if len(page.Entries) > 0 && page.Entries[0].Offset == 1 {
			return false, fmt.Sprintf("entries %s", offsets(page))
		}
		if since := time.Since(sent1); since+margin < short.TTL {
			t.Fatalf("the first event is gone %v after it was published, before its TTL %v", since, short.TTL)
		}
		if len(page.Entries) == 0 {
			if since := time.Since(sent2); since+margin < short.TTL {
				t.Fatalf("the second event is gone %v after it was published, before its TTL %v", since, short.TTL)
			}
			return true, ""
		}
		checkEntries(t, "Read once the first event expired", page, 2, 2, numbered)
		return true, ""
	})
	poll.Until(t, Wait, "the second event to expire", func() (bool, string) {
		page := read(t, c.Histories[0], short, "app", "fleeting", 0, 100)
		return len(page.Entries) == 0, fmt.Sprintf("entries %s", offsets(page))
	})
	next := publish(t, c.Histories[0], short, event("app", "fleeting", "m3"))
	if (next.Epoch != first.Epoch || next.Offset != 3) && (next.Epoch == first.Epoch || next.Offset != 1) {
		t.Errorf("after every event expired the next one is %+v; want offset 3 of epoch %q or offset 1 of a new epoch", next, first.Epoch)
	}
	page := read(t, c.Histories[1], short, "app", "fleeting", 0, 100)
	if page.Latest != next {
		t.Errorf("Latest %+v, want %+v", page.Latest, next)
	}
	checkEntries(t, "Read after the next event", page, next.Offset, next.Offset, func(uint64) string { return "m3" })
}

// testInvalid: a rule without a size or a TTL is refused with CodeInvalid, not kept.
func testInvalid(t *testing.T, nc NewCluster) {
	c := start(t, nc, 1)
	ctx, cancel := ctxWait()
	defer cancel()
	for _, r := range []herald.HistoryRule{{Channels: "*", TTL: time.Hour}, {Channels: "*", Size: 10}} {
		if _, err := c.Histories[0].Publish(ctx, r, event("app", "bad", "x")); herald.CodeOf(err) != herald.CodeInvalid {
			t.Errorf("Publish under %+v: %v, want a CodeInvalid error", r, err)
		}
		if _, err := c.Histories[0].Read(ctx, r, "app", "bad", 0, 10); herald.CodeOf(err) != herald.CodeInvalid {
			t.Errorf("Read under %+v: %v, want a CodeInvalid error", r, err)
		}
	}
	if page := read(t, c.Histories[0], rule, "app", "bad", 0, 10); page.Latest != (herald.Position{}) {
		t.Errorf("Latest %+v after refused publishes, want none", page.Latest)
	}
}
