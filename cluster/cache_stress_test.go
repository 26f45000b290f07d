package cluster

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// TestCacheConcurrentWritesKeepTheBounds races writers of two apps over overlapping cache
// channels with readers, expiry and compaction, then checks the books: every entry in a map
// is on both lists and counted, nothing else is, and both bounds hold.
func TestCacheConcurrentWritesKeepTheBounds(t *testing.T) {
	const node, perApp = 256 << 10, 160 << 10
	ids := []string{"app-id", "b"}
	eng := fanout.New(fanout.Config{Workers: 2}, nil)
	t.Cleanup(eng.Stop)
	h := NewLocal(Config{CacheMaxBytes: node, CacheMaxBytesPerApp: perApp, CacheTTL: 300 * time.Millisecond}, eng)
	for _, id := range ids {
		h.AddApp(id, eng.NewGroup(id, fanout.Latencies{}), nil)
	}
	h.Start(nil)
	t.Cleanup(func() { h.Stop(t.Context()) })
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				a := h.app(ids[rand.IntN(2)])
				ch := "cache-" + strconv.Itoa(rand.IntN(300))
				ev := herald.Event{Name: "e", Channel: ch}
				if err := h.Publish(a, ev, []byte(strings.Repeat("x", rand.IntN(6000)))); err != nil {
					t.Error(err)
					return
				}
				a.cache.has("cache-"+strconv.Itoa(rand.IntN(300)), eng.Now())
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
			h.cache.expire(eng.Now())
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
	for _, a := range h.appList() {
		c := a.cache
		var bytes, entries int64
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			for name, e := range s.m {
				if !e.linked || e.name != name || e.c != c {
					t.Errorf("app %s: map entry %q is not on the lists (linked %v) or not its own", a.id, name, e.linked)
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
				a.id, bytes, entries, onList, c.bytes.Load(), c.entries.Load())
		}
		if bytes > perApp {
			t.Errorf("app %s holds %d bytes, over its bound of %d", a.id, bytes, perApp)
		}
		if c.evictions.Load() == 0 {
			t.Errorf("app %s: no evictions; the test did not pass the bounds", a.id)
		}
		total += bytes
	}
	if total != n.bytes || total > node || int64(walked) != h.app("app-id").cache.entries.Load()+h.app("b").cache.entries.Load() {
		t.Errorf("the node counts %d bytes (bound %d) and lists %d entries; the maps hold %d bytes", n.bytes, node, walked, total)
	}
}
