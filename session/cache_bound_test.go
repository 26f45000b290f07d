package session_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// cacheData is an event's data of about n bytes, as a REST publisher sends it: JSON text
// whose quotes the envelope escapes.
func cacheData(i, n int) string {
	return fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", n))
}

func appMetrics(t *testing.T, h *session.Server, id string) session.AppMetrics {
	t.Helper()
	for _, m := range h.AppMetrics() {
		if m.AppID == id {
			return m
		}
	}
	t.Fatalf("no metrics for app %s", id)
	return session.AppMetrics{}
}

// expectCached subscribes a new connection of app to channel (signed when private) and
// checks what it gets first: the cached event with data want, or pusher:cache_miss when want
// is "".
func expectCached(t *testing.T, addr string, a *herald.App, channel, want string) {
	t.Helper()
	c := dialWith(t, addr, "/app/"+a.Key, "", nil)
	sid := expectConnected(t, c)
	auth := ""
	if strings.HasPrefix(channel, "private-") {
		auth = a.Key + ":" + pusher.Sign(a.Secret, sid+":"+channel)
	}
	if err := c.Subscribe(channel, auth, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", 5*time.Second); err != nil {
		t.Fatalf("%s: %v", channel, err)
	}
	m, err := c.Read(5 * time.Second)
	if err != nil {
		t.Fatalf("%s: waiting for the cached event or cache_miss: %v", channel, err)
	}
	switch {
	case want == "" && m.Event != "pusher:cache_miss":
		t.Fatalf("%s: got %s (%.40s...), want pusher:cache_miss: the event should have been evicted", channel, m.Event, m.DataString())
	case want != "" && (m.Event == "pusher:cache_miss" || m.DataString() != want):
		t.Fatalf("%s: got %s (%.40s...), want the cached event", channel, m.Event, m.DataString())
	}
}

// TestCacheBoundPerApp publishes, as the REST API does, 10 KB events to 200 distinct cache
// channels of one app, four times its bound: the app's cache stays within its bound, the
// oldest channels answer cache_miss, the newest their event, and another app's cache is
// untouched.
func TestCacheBoundPerApp(t *testing.T) {
	const perApp = 512 << 10
	other := &herald.App{ID: "other", Key: "other-key", Secret: "other-secret", Limits: herald.DefaultLimits}
	h, addr := startServerState(t, session.Config{}, cluster.Config{CacheMaxBytes: 4 * perApp, CacheMaxBytesPerApp: perApp}, app, other)
	for i := 0; i < 10; i++ {
		if err := h.Publish(other.ID, herald.Event{Name: "e", Channel: fmt.Sprint("cache-o-", i), Data: cacheData(i, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	before := appMetrics(t, h, other.ID)
	const n = 200
	for i := 0; i < n; i++ {
		if err := h.Publish(app.ID, herald.Event{Name: "e", Channel: fmt.Sprint("cache-a-", i), Data: cacheData(i, 10_000)}); err != nil {
			t.Fatal(err)
		}
		if m := appMetrics(t, h, app.ID); m.CacheBytes > perApp {
			t.Fatalf("after %d publishes the app's cache holds %d bytes, over its bound of %d", i+1, m.CacheBytes, perApp)
		}
	}
	m := appMetrics(t, h, app.ID)
	// About 10.3 KB per entry: the bound holds 49; all 200 would be 2 MB.
	if m.CacheEntries < 40 || m.CacheEntries > 50 || m.CacheEvictions != n-m.CacheEntries {
		t.Fatalf("app cache: %d entries, %d evictions, %d bytes; want 40..50 entries and the rest evicted", m.CacheEntries, m.CacheEvictions, m.CacheBytes)
	}
	if after := appMetrics(t, h, other.ID); after.CacheEntries != 10 || after.CacheBytes != before.CacheBytes || after.CacheEvictions != 0 {
		t.Fatalf("other app's cache went from %+v to %+v; want it untouched", before, after)
	}
	expectCached(t, addr, app, "cache-a-0", "")
	expectCached(t, addr, app, fmt.Sprint("cache-a-", n-m.CacheEntries-1), "")
	expectCached(t, addr, app, fmt.Sprint("cache-a-", n-m.CacheEntries), cacheData(int(n-m.CacheEntries), 10_000))
	expectCached(t, addr, app, fmt.Sprint("cache-a-", n-1), cacheData(n-1, 10_000))
	expectCached(t, addr, other, "cache-o-0", cacheData(0, 100))

	// Writing again to a cached channel makes it the most recent: it outlives the others.
	keep := fmt.Sprint("cache-a-", n-m.CacheEntries)
	if err := h.Publish(app.ID, herald.Event{Name: "e", Channel: keep, Data: "again"}); err != nil {
		t.Fatal(err)
	}
	for i := n; i < n+int(m.CacheEntries); i++ {
		if err := h.Publish(app.ID, herald.Event{Name: "e", Channel: fmt.Sprint("cache-a-", i), Data: cacheData(i, 10_000)}); err != nil {
			t.Fatal(err)
		}
	}
	expectCached(t, addr, app, keep, "again")
	expectCached(t, addr, app, fmt.Sprint("cache-a-", n-1), "")
}

// TestCacheBoundPerNode fills two apps' caches, each within its own bound but together over
// the node's: the node's least recently written entries go first, whatever their app.
func TestCacheBoundPerNode(t *testing.T) {
	const node = 512 << 10
	other := &herald.App{ID: "other", Key: "other-key", Secret: "other-secret", Limits: herald.DefaultLimits}
	h, addr := startServerState(t, session.Config{}, cluster.Config{CacheMaxBytes: node, CacheMaxBytesPerApp: node}, app, other)
	const n = 40 // 40 x 10 KB per app: 800 KB together
	for _, a := range []*herald.App{app, other} {
		for i := 0; i < n; i++ {
			if err := h.Publish(a.ID, herald.Event{Name: "e", Channel: fmt.Sprint("cache-", i), Data: cacheData(i, 10_000)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mine, theirs := appMetrics(t, h, app.ID), appMetrics(t, h, other.ID)
	if total := mine.CacheBytes + theirs.CacheBytes; total > node || total < node*9/10 {
		t.Fatalf("the node's caches hold %d bytes (app %d, other %d); want at most %d and near it", total, mine.CacheBytes, theirs.CacheBytes, node)
	}
	// The first app wrote first: it lost entries, the second none.
	if theirs.CacheEntries != n || theirs.CacheEvictions != 0 || mine.CacheEvictions == 0 || mine.CacheEntries+mine.CacheEvictions != n {
		t.Fatalf("app: %+v\nother: %+v\nwant the first app's oldest evicted and the other's all kept", mine, theirs)
	}
	expectCached(t, addr, app, "cache-0", "")
	expectCached(t, addr, app, fmt.Sprint("cache-", n-1), cacheData(n-1, 10_000))
	expectCached(t, addr, other, "cache-0", cacheData(0, 10_000))
}

// TestCacheBoundCountsRealMemory checks that the bound is true for the heap: after ten times
// the bound of 10 KB events to distinct channels, the live heap grew by about the bytes the
// cache reports, and those are within the bound. (Each entry used to keep the encoder's
// buffer: 12% more than its frame, for 30 minutes.)
func TestCacheBoundCountsRealMemory(t *testing.T) {
	const bound = 4 << 20
	h, _ := startServerState(t, session.Config{}, cluster.Config{CacheMaxBytes: bound, CacheMaxBytesPerApp: bound}, app)
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base := heap()
	const n = 4000 // 40 MB of events
	for i := 0; i < n; i++ {
		if err := h.Publish(app.ID, herald.Event{Name: "e", Channel: fmt.Sprint("cache-mem-", i), Data: cacheData(i, 10_000)}); err != nil {
			t.Fatal(err)
		}
	}
	grew := heap() - base
	m := appMetrics(t, h, app.ID)
	t.Logf("heap grew %d bytes; the cache counts %d bytes in %d entries", grew, m.CacheBytes, m.CacheEntries)
	if m.CacheBytes > bound || m.CacheEntries >= n {
		t.Fatalf("cache holds %d bytes in %d entries; want at most %d bytes", m.CacheBytes, m.CacheEntries, bound)
	}
	// The counted bytes are the heap's, give or take a few percent (map growth, stray
	// allocations of the test itself).
	if grew > m.CacheBytes*105/100+256<<10 || grew < m.CacheBytes*80/100 {
		t.Fatalf("the heap grew by %d bytes while the cache counts %d in %d entries; want them within a few percent", grew, m.CacheBytes, m.CacheEntries)
	}
}

// TestCacheBoundClientEvents is the second attack on the cache bound (the first is REST): clients
// within their rate limit each send a client event to their own private-cache-* channel, then
// leave. The app's cache stays within its bound with no connection and no channel left, and keeps
// the newest.
func TestCacheBoundClientEvents(t *testing.T) {
	const perApp = 256 << 10
	h, addr := startServerState(t, session.Config{}, cluster.Config{CacheMaxBytes: 4 * perApp, CacheMaxBytesPerApp: perApp}, app)
	const clients = 300
	data := func(i int) string { return cacheData(i, 8000) }
	for i := 0; i < clients; i++ {
		ch := fmt.Sprint("private-cache-ce-", i)
		c, err := wstest.Dial(addr, "/app/"+app.Key+"?protocol=7")
		if err != nil {
			t.Fatal(err)
		}
		sid, err := c.SocketID(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe(ch, app.Key+":"+pusher.Sign(app.Secret, sid+":"+ch), ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher_internal:subscription_succeeded", 5*time.Second); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if err := c.WriteJSON(map[string]any{"event": "client-x", "channel": ch, "data": data(i)}); err != nil {
			t.Fatal(err)
		}
		// The pong proves the client event before it was handled.
		if err := c.WriteJSON(map[string]any{"event": "pusher:ping", "data": map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Expect("pusher:pong", 5*time.Second); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		c.Close()
		if m := appMetrics(t, h, app.ID); m.CacheBytes > perApp {
			t.Fatalf("after %d clients the app's cache holds %d bytes, over its bound of %d", i+1, m.CacheBytes, perApp)
		}
	}
	poll.Until(t, 10*time.Second, "every client gone", func() (bool, string) {
		m := appMetrics(t, h, app.ID)
		return m.Connections == 0 && m.Channels == 0, fmt.Sprintf("%d connections, %d channels", m.Connections, m.Channels)
	})
	m := appMetrics(t, h, app.ID)
	if m.CacheBytes > perApp || m.CacheEntries == 0 || m.CacheEntries >= clients/4 || m.CacheEvictions != clients-m.CacheEntries {
		t.Fatalf("with no client left the cache holds %d bytes in %d entries (%d evicted); want at most %d bytes and the rest evicted",
			m.CacheBytes, m.CacheEntries, m.CacheEvictions, perApp)
	}
	expectCached(t, addr, app, "private-cache-ce-0", "")
	expectCached(t, addr, app, fmt.Sprint("private-cache-ce-", clients-1), data(clients-1))
}

// TestCacheTTL checks that expiry still works with the bound: an entry past its TTL is
// gone from the count and its channel answers cache_miss.
func TestCacheTTL(t *testing.T) {
	h, addr := startServerState(t, session.Config{}, cluster.Config{CacheTTL: 300 * time.Millisecond}, app)
	if err := h.Publish(app.ID, herald.Event{Name: "e", Channel: "cache-ttl", Data: "x"}); err != nil {
		t.Fatal(err)
	}
	if m := appMetrics(t, h, app.ID); m.CacheEntries != 1 || m.CacheBytes == 0 {
		t.Fatalf("after one publish: %d entries, %d bytes; want 1 entry", m.CacheEntries, m.CacheBytes)
	}
	poll.Until(t, 10*time.Second, "the entry to expire", func() (bool, string) {
		m := appMetrics(t, h, app.ID)
		return m.CacheEntries == 0 && m.CacheBytes == 0, fmt.Sprintf("%d entries, %d bytes", m.CacheEntries, m.CacheBytes)
	})
	if m := appMetrics(t, h, app.ID); m.CacheEvictions != 0 {
		t.Fatalf("%d evictions; an expiry is not one", m.CacheEvictions)
	}
	expectCached(t, addr, app, "cache-ttl", "")
}
