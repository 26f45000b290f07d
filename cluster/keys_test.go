package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

func keyedEvents(channel string, keys ...string) []herald.Event {
	evs := make([]herald.Event, len(keys))
	for i, k := range keys {
		evs[i] = herald.Event{Name: "e", Channel: channel, Key: k}
	}
	return evs
}

// A key's first publish goes through; a repeat after it succeeded is left out; one after it
// failed goes through; keys are per app and channel; events without a key cost nothing.
func TestKeysRepeat(t *testing.T) {
	k := newKeys(time.Minute, 1<<10)
	if skip, held, err := k.claim(time.Second, "a", []herald.Event{{Channel: "c"}}); skip != nil || held != nil || err != nil {
		t.Fatalf("events without a key: skip %v held %v err %v; want nothing", skip, held, err)
	}
	skip, held, err := k.claim(time.Second, "a", keyedEvents("c", "k1", "", "k1"))
	if err != nil || len(held) != 1 || skip[0] || skip[1] || !skip[2] {
		t.Fatalf("first claim: skip %v, %d held, err %v; want the second k1 left out, one key held", skip, len(held), err)
	}
	k.settle("a", held, true)
	skip, held, _ = k.claim(time.Second, "a", keyedEvents("c", "k1", "k2"))
	if !skip[0] || skip[1] || len(held) != 1 {
		t.Fatalf("after success: skip %v, %d held; want k1 left out and k2 held", skip, len(held))
	}
	k.settle("a", held, false) // k2's publish failed
	skip, held, _ = k.claim(time.Second, "a", keyedEvents("c", "k2"))
	if skip[0] || len(held) != 1 {
		t.Fatalf("after a failure: skip %v; want k2 to go through again", skip)
	}
	k.settle("a", held, true)
	for _, o := range []struct{ app, ch string }{{"b", "c"}, {"a", "d"}} {
		skip, held, _ = k.claim(time.Second, o.app, keyedEvents(o.ch, "k1"))
		if skip[0] {
			t.Errorf("k1 on app %s channel %s left out; want it kept apart from app a channel c", o.app, o.ch)
		}
		k.settle(o.app, held, true)
	}
	if st := k.stats(); st.Repeats != 1 || st.Held != 4 {
		t.Errorf("stats %+v; want 1 repeat and 4 keys held", st)
	}
}

// A repeat while the first publish is in flight waits for its outcome: left out when it
// succeeded, taken when it failed; refused with CodeBusy when it stays in flight.
func TestKeysInFlight(t *testing.T) {
	k := newKeys(time.Minute, 1<<10)
	for _, ok := range []bool{true, false} {
		key := map[bool]string{true: "ok", false: "failed"}[ok]
		_, held, _ := k.claim(time.Second, "a", keyedEvents("c", key))
		var wg sync.WaitGroup
		var skip []bool
		var held2 []*keyState
		var err error
		wg.Go(func() { skip, held2, err = k.claim(20*time.Second, "a", keyedEvents("c", key)) })
		deadline := time.Now().Add(20 * time.Second)
		for k.stats().Waits == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		k.settle("a", held, ok)
		wg.Wait()
		if err != nil || skip[0] != ok || (len(held2) == 1) == ok {
			t.Errorf("first publish ok=%v: the waiting repeat got skip %v, %d held, err %v", ok, skip, len(held2), err)
		}
		k.settle("a", held2, true)
		k.waits.Store(0)
	}
	_, held, _ := k.claim(time.Second, "a", keyedEvents("c", "stuck"))
	if _, _, err := k.claim(50*time.Millisecond, "a", keyedEvents("c", "stuck")); herald.CodeOf(err) != herald.CodeBusy {
		t.Errorf("a repeat of a publish stuck in flight: %v; want CodeBusy", err)
	}
	k.settle("a", held, true)
}

// Keys are forgotten when their window ends, and the oldest early past the bound.
func TestKeysExpire(t *testing.T) {
	k := newKeys(50*time.Millisecond, 1<<10)
	_, held, _ := k.claim(time.Second, "a", keyedEvents("c", "k"))
	k.settle("a", held, true)
	deadline := time.Now().Add(20 * time.Second)
	for {
		skip, held, _ := k.claim(time.Second, "a", keyedEvents("c", "k"))
		k.settle("a", held, true)
		if !skip[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key is still remembered 20 s after a window of 50 ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	k = newKeys(time.Hour, 1024)
	for i := range 3000 {
		_, held, _ := k.claim(time.Second, "a", keyedEvents("c", string(rune('a'+i%26))+time.Duration(i).String()))
		k.settle("a", held, true)
	}
	if st := k.stats(); st.Held > 1025 || st.Evicted < 1975 {
		t.Errorf("3000 keys with a bound of 1024: %+v; want at most 1025 held, the rest evicted", st)
	}
}

// An event handed off again after a lost bus connection is not stopped by the node's memory
// of its key: the history store decides.
func TestKeysResent(t *testing.T) {
	k := newKeys(time.Minute, 1<<10)
	_, held, _ := k.claim(time.Second, "a", keyedEvents("c", "k"))
	k.settle("a", held, true)
	evs := keyedEvents("c", "k")
	evs[0].Resent = true
	if skip, held, err := k.claim(time.Second, "a", evs); skip != nil || held != nil || err != nil {
		t.Errorf("a resent event: skip %v, held %v, err %v; want it to go through untouched", skip, held, err)
	}
}
