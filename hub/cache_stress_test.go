package hub

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// TestCacheConcurrentWritesKeepTheBounds races writers of two apps over overlapping cache
// channels with readers, expiry and compaction, then checks the books: every entry in a map
// is on both lists and counted, nothing else is, and both bounds hold.
func TestCacheConcurrentWritesKeepTheBounds(t *testing.T) {
	const node, perApp = 256 << 10, 160 << 10
	apps := []*herald.App{testApp(), {ID: "b", Key: "b-key", Secret: "b-secret", Limits: herald.DefaultLimits}}
	h, err := New(Config{Workers: 2, MaxConnections: 10, CacheMaxBytes: node, CacheMaxBytesPerApp: perApp, CacheTTL: 300 * time.Millisecond}, apps, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Shutdown(t.Context()) })
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				id := apps[rand.IntN(2)].ID
				ch := "cache-" + strconv.Itoa(rand.IntN(300))
				if err := h.Publish(id, herald.Event{Name: "e", Channel: ch, Data: strings.Repeat("x", rand.IntN(6000))}); err != nil {
					t.Error(err)
					return
				}
				h.apps[id].cache.has("cache-"+strconv.Itoa(rand.IntN(300)), h.now())
			}
		}()
	}
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.cache.expire(h.now())
			h.cache.compact()
			time.Sleep(time.Millisecond) // pacing a background loop, not waiting for a result
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()

	n := h.cache
	n.mu.Lock()
	defer n.mu.Unlock()
	var total int64
	walked := 0
	for e := n.all.link[byNode].next; e != &n.all; e = e.link[byNode].next {
		walked++
	}
	for _, a := range h.apps {
		c := a.cache
		var bytes, entries int64
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			for name, e := range s.m {
				if !e.linked || e.name != name || e.c != c {
					t.Errorf("app %s: map entry %q is not on the lists (linked %v) or not its own", a.app.ID, name, e.linked)
				}
				bytes += e.size
				entries++
			}
			s.mu.Unlock()
		}
		onList := int64(0)
		for e := c.own.link[byApp].next; e != &c.own; e = e.link[byApp].next {
			onList++
		}
		if bytes != c.bytes.Load() || entries != c.entries.Load() || onList != entries {
			t.Errorf("app %s: maps hold %d bytes in %d entries, %d on its list; counted %d bytes in %d entries",
				a.app.ID, bytes, entries, onList, c.bytes.Load(), c.entries.Load())
		}
		if bytes > perApp {
			t.Errorf("app %s holds %d bytes, over its bound of %d", a.app.ID, bytes, perApp)
		}
		if c.evictions.Load() == 0 {
			t.Errorf("app %s: no evictions; the test did not pass the bounds", a.app.ID)
		}
		total += bytes
	}
	if total != n.bytes || total > node || int64(walked) != h.apps["app-id"].cache.entries.Load()+h.apps["b"].cache.entries.Load() {
		t.Errorf("the node counts %d bytes (bound %d) and lists %d entries; the maps hold %d bytes", n.bytes, node, walked, total)
	}
}
