package appstoretest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

// history: herald's history column, added to Soketi's table as the docs say, is read into
// the apps' history rules (ttl a duration or seconds); a rule herald cannot keep is left out
// and counted, the app served all the same; a change of the column is a change of the app;
// the apps API's insert and update write it.
func history(t *testing.T, db DB) {
	table := db.table(t, db.Soketi)
	db.Exec(t, fmt.Sprintf(db.History, table))
	for _, id := range []string{"kept", "broken", "object", "none"} {
		db.soketiRow(t, table, id, id+"-key", 1, 10)
	}
	set := func(id, column string) {
		t.Helper()
		db.Exec(t, fmt.Sprintf("UPDATE %s SET history = %s WHERE id = %s", table, db.Param(1), db.Param(2)), column, id)
	}
	set("kept", `[{"channels": "auction-*", "size": 1000, "ttl": "10m"}, {"channels": "presence-room-*", "size": 50, "ttl": 90}]`)
	set("broken", `[{"channels": "a-*", "size": 0, "ttl": "1m"}, {"channels": "b-*", "size": 5, "ttl": "1h"}]`)
	set("object", `{"channels": "a-*", "size": 10, "ttl": "1m"}`)
	s, rec := db.store(t, table)

	want := map[string][]herald.HistoryRule{
		"kept":   {{Channels: "auction-*", Size: 1000, TTL: 10 * time.Minute}, {Channels: "presence-room-*", Size: 50, TTL: 90 * time.Second}},
		"broken": {{Channels: "b-*", Size: 5, TTL: time.Hour}},
		"object": nil,
		"none":   nil,
	}
	for id, rules := range want {
		if a, ok := s.AppByID(id); !ok || !reflect.DeepEqual(a.History, rules) {
			t.Fatalf("%s: found %v, %+v; want the app with rules %+v", id, ok, a, rules)
		}
	}
	if st := s.Status(); st.BadHistory != 2 || st.BadWebhooks != 0 || !st.Up || len(s.Apps()) != 4 {
		t.Fatalf("status %+v: want 4 apps up, 2 of them without some of their history rules", st)
	}

	set("broken", `[{"channels": "a-*", "size": 10, "ttl": "1m"}]`)
	rec.waitFor(t, "the history column changed", func(c herald.AppChange) bool {
		return c.New != nil && c.New.ID == "broken" && reflect.DeepEqual(c.New.History, []herald.HistoryRule{{Channels: "a-*", Size: 10, TTL: time.Minute}})
	})
	eventually(t, "one app left with bad history rules", func() bool { return s.Status().BadHistory == 1 })
	set("kept", "[]")
	rec.waitFor(t, "the rules removed", func(c herald.AppChange) bool { return c.New != nil && c.New.ID == "kept" && c.New.History == nil })

	w := s.Source().(appstore.Writer)
	ctx := context.Background()
	rules := []herald.HistoryRule{{Channels: "auction-*", Size: 100000, TTL: 7 * 24 * time.Hour}, {Channels: "*", Size: 1, TTL: 1500 * time.Millisecond}}
	in := herald.App{ID: "inserted", Key: "inserted-key", Secret: "s", History: rules}
	if err := w.Insert(ctx, in); err != nil {
		t.Fatal(err)
	}
	readBack := func(what string, want []herald.HistoryRule) {
		t.Helper()
		if err := s.ReloadApp(ctx, "inserted"); err != nil {
			t.Fatal(err)
		}
		if a, ok := s.AppByID("inserted"); !ok || !reflect.DeepEqual(a.History, want) {
			t.Fatalf("%s: found %v, %+v; want rules %+v", what, ok, a, want)
		}
	}
	readBack("inserted", rules)
	in.History = rules[1:]
	if err := w.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	readBack("updated", rules[1:])
	in.History = nil
	if err := w.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	readBack("updated without rules", nil)
	// No rule is written as NULL (the column's default), not as an empty list.
	db.Exec(t, fmt.Sprintf("DELETE FROM %s WHERE id = 'inserted' AND history IS NULL", table))
	if err := s.ReloadApp(ctx, "inserted"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.AppByID("inserted"); ok {
		t.Fatal("an app without rules is not written with a NULL history")
	}
	if st := s.Status(); st.BadHistory != 1 {
		t.Fatalf("status %+v: want 1 app left with bad history rules", st)
	}
}
