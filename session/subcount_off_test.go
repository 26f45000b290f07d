package session

import "testing"

// TestSubscriptionCountOffCostsNothing: with no app sending subscription counts the hub has no
// bookkeeping for them (nor the goroutine that sends them), and subscribing and leaving touch
// none of it.
func TestSubscriptionCountOffCostsNothing(t *testing.T) {
	h := newTestHub(t, Config{})
	if h.subCounts != nil {
		t.Fatal("subscription count bookkeeping on a hub whose apps do not send counts")
	}
	c := h.attachFake(&memTransport{})
	subscribeFake(t, h, c, "room") // would dereference the nil bookkeeping if it marked
	h.unsubscribe(c, 0)
	h.fence()
}
