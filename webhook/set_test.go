package webhook

import (
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// TestSetFollowsTheApp: Set changes an app's webhooks while the Sender runs. A webhook kept
// keeps what it queued (even while its endpoint fails), a new secret signs the next
// requests, a changed URL gets the next events and the old one what it held (its leaves still
// delayed at once), and an app without webhooks sends nothing more.
func TestSetFollowsTheApp(t *testing.T) {
	kept, added, moved := startReceiver(t), startReceiver(t), startReceiver(t)
	kept.answer = func(n int) int {
		if n == 1 {
			return 503 // the first batch waits for a retry across the change below
		}
		return 200
	}
	s, o := newSender(t, []Webhook{{URL: kept.srv.URL}}, Options{LeaveDelay: time.Hour})
	o.Observe(act(herald.ChannelOccupied, "a"))
	eventually(t, "the first attempt fails", func() (bool, string) {
		kept.mu.Lock()
		defer kept.mu.Unlock()
		return kept.calls >= 1, ""
	})

	app := testApp
	app.Secret = "new-secret"
	app.Webhooks = []Webhook{{URL: kept.srv.URL}, {URL: added.srv.URL, EventTypes: []string{ChannelOccupied}}}
	if !s.Set(app) || s.Observer("app-id") != o {
		t.Fatal("Set of an app with webhooks: want it kept, with the same observer")
	}
	o.Observe(act(herald.ChannelOccupied, "b"))
	expectEvents(t, kept, "channel_occupied a", "channel_occupied b")
	expectEvents(t, added, "channel_occupied b")
	for _, r := range []*receiver{kept, added} {
		r.mu.Lock()
		q := r.got[len(r.got)-1]
		r.mu.Unlock()
		if q.Signature != Sign("new-secret", q.Body) {
			t.Fatal("a request after the secret changed is not signed with the new secret")
		}
	}

	// A leave delayed an hour, then the URL moves: the old URL gets it at once.
	o.Observe(act(herald.ChannelVacated, "b"))
	app.Webhooks = []Webhook{{URL: moved.srv.URL}, {URL: added.srv.URL, EventTypes: []string{ChannelOccupied}}}
	s.Set(app)
	o.Observe(act(herald.ChannelOccupied, "c"))
	expectEvents(t, kept, "channel_occupied a", "channel_occupied b", "channel_vacated b")
	expectEvents(t, moved, "channel_occupied c")
	expectEvents(t, added, "channel_occupied b", "channel_occupied c")

	// Same URL, other event types: the successor sends after its predecessor.
	app.Webhooks = []Webhook{{URL: moved.srv.URL, EventTypes: []string{MemberAdded}}}
	s.Set(app)
	if o.Wants() != herald.Activities(herald.MemberAdded, herald.MemberRemoved) {
		t.Fatalf("wants %b after the change", o.Wants())
	}
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "presence-c", UserID: "u"})
	expectEvents(t, moved, "channel_occupied c", "member_added presence-c u")

	st := s.Stats()
	if len(st) != 1 || st[0].Sent != 7 {
		t.Fatalf("stats %+v: want the 7 events sent, those of webhooks removed included", st)
	}

	app.Webhooks = nil
	if s.Set(app) || s.Observer("app-id") != nil || len(s.Apps()) != 0 || len(s.Stats()) != 0 {
		t.Fatal("an app left without webhooks is still there")
	}
	o.Observe(&herald.Activity{Kind: herald.MemberAdded, Channel: "presence-c", UserID: "v"}) // late: dropped
	s.Remove("app-id")                                                                        // no-op
	// A new app is followed too.
	s.Set(App{ID: "new", Key: "nk", Secret: "ns", Webhooks: []Webhook{{URL: moved.srv.URL}}})
	s.Observer("new").Observe(&herald.Activity{Kind: herald.ChannelOccupied, Channel: "n"})
	expectEvents(t, moved, "channel_occupied c", "member_added presence-c u", "channel_occupied n")
	moved.mu.Lock()
	q := moved.got[len(moved.got)-1]
	moved.mu.Unlock()
	if q.Key != "nk" || q.Signature != Sign("ns", q.Body) {
		t.Fatalf("the new app's request: key %q, signature not the new app's", q.Key)
	}
}
