package session

import (
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
)

type nullObserver struct{ want herald.ActivitySet }

func (o nullObserver) Wants() herald.ActivitySet { return o.want }
func (o nullObserver) Observe(*herald.Activity)  {}

// TestActivityUnwantedCostsNothing: with observers that want none of the kinds a publish or
// a subscription reports, neither allocates more than with no observer at all.
func TestActivityUnwantedCostsNothing(t *testing.T) {
	measure := func(attach bool) (pub, sub float64) {
		h, _ := setupBroadcast(t, 100)
		if attach {
			if _, err := h.Observe("app-id", nullObserver{want: herald.Activities(herald.WebhookSent)}); err != nil {
				t.Fatal(err)
			}
		}
		c := h.attachFake(&memTransport{})
		h.fence()
		m := pusher.Message{Event: "pusher:subscribe", Data: []byte(`{"channel":"cost"}`)}
		pub = testing.AllocsPerRun(200, func() {
			if err := h.Publish("app-id", benchEvent); err != nil {
				t.Fatal(err)
			}
			h.fence()
		})
		sub = testing.AllocsPerRun(200, func() {
			h.subscribe(c, m)
			h.unsubscribe(c, 0)
			h.fence()
		})
		return pub, sub
	}
	p0, s0 := measure(false)
	p1, s1 := measure(true)
	t.Logf("allocations: publish %v / %v, subscribe+unsubscribe %v / %v (no observer / observer wanting other kinds)", p0, p1, s0, s1)
	if p1 != p0 || s1 != s0 {
		t.Fatalf("an observer that wants none of these kinds costs allocations: publish %v -> %v, subscribe %v -> %v", p0, p1, s0, s1)
	}
	// And one that wants them does get them (the measurement above is not vacuous).
	h, _ := setupBroadcast(t, 1)
	var n int
	if _, err := h.Observe("app-id", countObserver{n: &n, want: herald.Activities(herald.APIEvent)}); err != nil {
		t.Fatal(err)
	}
	if err := h.Publish("app-id", benchEvent); err != nil || n != 1 {
		t.Fatalf("api_event reported %d times, err %v", n, err)
	}
}

type countObserver struct {
	n    *int
	want herald.ActivitySet
}

func (o countObserver) Wants() herald.ActivitySet { return o.want }
func (o countObserver) Observe(*herald.Activity)  { *o.n++ }
