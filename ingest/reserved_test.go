package ingest

import (
	"context"
	"fmt"
	"testing"

	"github.com/herald-rt/herald"
)

// TestReservedAndDisallowed: a record that would publish a protocol event (pusher: or
// pusher_internal:, whether in the pusher format or rendered by a template) or reach a
// channel outside the source's allow_channels is a bad record: counted by its reason,
// dead-lettered, never published.
func TestReservedAndDisallowed(t *testing.T) {
	type dead struct {
		pos    string
		reason Reason
	}
	run := func(t *testing.T, cfg Config, vals ...string) ([]herald.Event, []dead, Stats) {
		t.Helper()
		pub := &publisherStub{}
		cfg.Name, cfg.App = "t", &herald.App{ID: "app"}
		p, err := New(cfg, pub)
		if err != nil {
			t.Fatal(err)
		}
		var dl []dead
		p.SetDeadLetter(func(_ context.Context, r *Record, reason Reason, _ string) error {
			dl = append(dl, dead{r.Position, reason})
			return nil
		})
		var recs []Record
		for i, v := range vals {
			recs = append(recs, Record{Position: Offset(int64(i)), Value: []byte(v)})
		}
		if n, err := p.Handle(context.Background(), recs); n != len(recs) || err != nil {
			t.Fatalf("Handle = %d, %v", n, err)
		}
		return pub.events(), dl, p.Stats()
	}
	t.Run("pusher format, default allow", func(t *testing.T) {
		evs, dl, st := run(t, Config{Format: FormatPusher},
			`{"name":"pusher_internal:member_added","channel":"room","data":"{\"user_id\":\"fake\"}"}`,
			`{"name":"pusher:error","channel":"room","data":"{}"}`,
			`{"name":"bid","channel":"presence-room","data":"{}"}`,
			`{"name":"bid","channels":["room","private-room"],"data":"{}"}`,
			`{"name":"bid","channel":"private-encrypted-x","data":"{}"}`,
			`{"name":"bid","channel":"#server-to-user-42","data":"{}"}`,
			`{"name":"bid","channels":["room","cache-room"],"data":"ok"}`,
		)
		want := []dead{{"0", ReasonInvalidEvent}, {"1", ReasonInvalidEvent}, {"2", ReasonChannelNotAllowed},
			{"3", ReasonChannelNotAllowed}, {"4", ReasonChannelNotAllowed}, {"5", ReasonChannelNotAllowed}}
		if fmt.Sprint(dl) != fmt.Sprint(want) {
			t.Errorf("dead letters %v, want %v", dl, want)
		}
		if len(evs) != 2 || evs[0].Channel != "room" || evs[1].Channel != "cache-room" {
			t.Errorf("published %+v, want the last record's two events only", evs)
		}
		if st.Bad[ReasonInvalidEvent] != 2 || st.Bad[ReasonChannelNotAllowed] != 4 || st.DeadLettered != 6 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("templates, allow list", func(t *testing.T) {
		evs, dl, st := run(t, Config{Channel: mustTemplate(t, "{value.ch}"), Event: mustTemplate(t, "{value.ev}"),
			AllowChannels: []string{"presence-room-*", "ticker"}},
			`{"ch":"presence-room-1","ev":"pusher:error"}`,
			`{"ch":"presence-room-1","ev":"pusher_internal:member_removed"}`,
			`{"ch":"presence-other","ev":"msg"}`,
			`{"ch":"room","ev":"msg"}`,
			`{"ch":"presence-room-1","ev":"msg"}`,
			`{"ch":"ticker","ev":"msg"}`,
		)
		want := []dead{{"0", ReasonInvalidEvent}, {"1", ReasonInvalidEvent}, {"2", ReasonChannelNotAllowed}, {"3", ReasonChannelNotAllowed}}
		if fmt.Sprint(dl) != fmt.Sprint(want) {
			t.Errorf("dead letters %v, want %v", dl, want)
		}
		if len(evs) != 2 || evs[0].Channel != "presence-room-1" || evs[1].Channel != "ticker" {
			t.Errorf("published %+v", evs)
		}
		if st.Bad[ReasonChannelNotAllowed] != 2 {
			t.Errorf("stats %+v", st.Bad)
		}
	})
}
