package session

import "testing"

// TestSubscriptionCountOffCostsNothing: with no app sending subscription counts the server does
// no bookkeeping for them (its rounds start with the first app that sends them), and
// subscribing and leaving mark nothing.
func TestSubscriptionCountOffCostsNothing(t *testing.T) {
	h := testServer(t, Config{})
	c := h.attachFake(&memTransport{})
	subscribeFake(t, h, c, "room")
	h.unsubscribe(c, 0)
	h.fence()
	h.subCounts.mu.Lock()
	defer h.subCounts.mu.Unlock()
	if len(h.subCounts.dirty) != 0 {
		t.Fatalf("%d channels marked for subscription counts on a server whose apps do not send them", len(h.subCounts.dirty))
	}
}
