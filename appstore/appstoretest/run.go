package appstoretest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

// Wait bounds every wait of the suite for something that should happen: generous, the
// machines are shared.
const Wait = 20 * time.Second

// DB is one database server, in one SQL dialect, for Run.
type DB struct {
	// Exec runs statements on the database, on a connection of the test's own.
	Exec func(t testing.TB, query string, args ...any)
	// Param is the placeholder of the i-th argument (from 1): "$1" or "?".
	Param func(i int) string
	// Quote quotes an identifier ("key" is reserved in both dialects).
	Quote func(name string) string
	// Soketi and Sockudo are CREATE TABLE statements exactly as their docs give them, with
	// %s for the table's name.
	Soketi, Sockudo string
	// UpdatedAt adds an updated_at column the database keeps current (%s: the table).
	UpdatedAt string
	// History adds herald's history column as docs/app-stores.md does (%s: the table).
	History string
	// Open opens the adapter's Source over table.
	Open func(t testing.TB, table string) appstore.Source
	// Stop and Start stop the server (as a crash would) and start it again.
	Stop, Start func(t testing.TB)
}

var tables atomic.Int64

// table creates a table from ddl (Soketi's or Sockudo's) with a fresh name.
func (db DB) table(t *testing.T, ddl string) string {
	name := fmt.Sprintf("apps_%d_%d", time.Now().UnixNano()%1_000_000, tables.Add(1))
	db.Exec(t, fmt.Sprintf(ddl, name))
	return name
}

// soketiRow inserts a row as Soketi's docs do (-1 for "no limit", NULL for "default").
func (db DB) soketiRow(t testing.TB, table, id, key string, enabled int, maxConns int) {
	q := db.Quote
	db.Exec(t, fmt.Sprintf(`INSERT INTO %s (id, %s, secret, max_connections, enable_client_messages, %s,
		max_backend_events_per_sec, max_client_events_per_sec, max_read_req_per_sec, webhooks,
		max_presence_members_per_channel, max_presence_member_size_in_kb, max_channel_name_length, max_event_channels_at_once,
		max_event_name_length, max_event_payload_in_kb, max_event_batch_size, enable_user_authentication)
		VALUES (%s, %s, 'secret-%s', %s, 1, %s, -1, -1, -1, '[]', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0)`,
		table, q("key"), q("enabled"), db.Param(1), db.Param(2), id, db.Param(3), db.Param(4)), id, key, maxConns, enabled)
}

// recorder keeps the changes a Store reports.
type recorder struct {
	mu      sync.Mutex
	changes []herald.AppChange
}

func (r *recorder) add(c []herald.AppChange) {
	r.mu.Lock()
	r.changes = append(r.changes, c...)
	r.mu.Unlock()
}

// waitFor polls until some change satisfies ok.
func (r *recorder) waitFor(t testing.TB, what string, ok func(herald.AppChange) bool) herald.AppChange {
	t.Helper()
	var found herald.AppChange
	eventually(t, what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.changes {
			if ok(c) {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

func eventually(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Wait, what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// store starts a Store over table with a short refresh and a recorder of its changes.
func (db DB) store(t *testing.T, table string) (*appstore.Store, *recorder) {
	rec := &recorder{}
	s := appstore.New(appstore.Config{Kind: "test", Refresh: 50 * time.Millisecond, OnChange: rec.add})
	if err := s.Start(db.Open(t, table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, rec
}

// Run is the suite for a database's Source. The outage test stops and starts the server:
// Run's subtests do not run in parallel.
func Run(t *testing.T, db DB) {
	t.Run("SoketiTable", func(t *testing.T) { soketiTable(t, db) })
	t.Run("SockudoTable", func(t *testing.T) { sockudoTable(t, db) })
	t.Run("Changes", func(t *testing.T) { changes(t, db, false) })
	t.Run("ChangesWithUpdatedAt", func(t *testing.T) { changes(t, db, true) })
	t.Run("Writer", func(t *testing.T) { writer(t, db) })
	t.Run("BadRow", func(t *testing.T) { badRow(t, db) })
	t.Run("Webhooks", func(t *testing.T) { webhooks(t, db) })
	t.Run("History", func(t *testing.T) { history(t, db) })
	t.Run("Outage", func(t *testing.T) { outage(t, db) })
}

// soketiTable: a table created as Soketi's docs create it, with Soketi's example row, reads
// as the app Soketi would run, and the store keeps the AppStore contract.
func soketiTable(t *testing.T, db DB) {
	table := db.table(t, db.Soketi)
	db.soketiRow(t, table, "app-id", "app-key", 1, 200)
	db.Exec(t, fmt.Sprintf(`INSERT INTO %s (id, %s, secret, max_connections, enable_client_messages, %s,
		max_backend_events_per_sec, max_client_events_per_sec, max_read_req_per_sec, webhooks,
		max_presence_members_per_channel, max_presence_member_size_in_kb, max_channel_name_length, max_event_channels_at_once,
		max_event_name_length, max_event_payload_in_kb, max_event_batch_size, enable_user_authentication)
		VALUES ('limited', 'limited-key', 'limited-secret', -1, 0, 0, 50, 7, 9, NULL, 5, 2, 40, 3, 30, 4, 6, 1)`, table, db.Quote("key"), db.Quote("enabled")))
	s, _ := db.store(t, table)
	Contract(t, s, []herald.App{
		{ID: "app-id", Key: "app-key", Secret: "secret-app-id", EnableClientMessages: true,
			Limits: herald.Limits{MaxConnections: 200, MaxClientEventsPerSecond: appstore.Unlimited}},
		{ID: "limited", Key: "limited-key", Secret: "limited-secret", Disabled: true, EnableUserAuthentication: true,
			Limits: herald.Limits{MaxAPIRequestsPerSecond: 50, MaxClientEventsPerSecond: 7, MaxPresenceMembers: 5,
				MaxPresenceMemberBytes: 2048, MaxChannelNameLength: 40, MaxChannelsPerEvent: 3, MaxEventNameLength: 30,
				MaxEventPayloadBytes: 4096, MaxBatchSize: 6}},
	})
}

// sockudoTable: Sockudo's table (its column names, booleans and updated_at) reads the same.
func sockudoTable(t *testing.T, db DB) {
	table := db.table(t, db.Sockudo)
	db.Exec(t, fmt.Sprintf(`INSERT INTO %s (id, %s, secret, max_connections, enable_client_messages, %s,
		max_backend_events_per_second, max_client_events_per_second, max_read_requests_per_second, enable_user_authentication)
		VALUES ('sockudo-app', 'sockudo-key', 'sockudo-secret', 10, true, true, 20, 30, 40, true)`, table, db.Quote("key"), db.Quote("enabled")))
	s, _ := db.store(t, table)
	Contract(t, s, []herald.App{{ID: "sockudo-app", Key: "sockudo-key", Secret: "sockudo-secret", EnableClientMessages: true,
		EnableUserAuthentication: true, Limits: herald.Limits{MaxConnections: 10, MaxAPIRequestsPerSecond: 20, MaxClientEventsPerSecond: 30}}})
}

// changes: rows inserted, updated (disabled, a limit changed) and deleted in the table reach
// the store and its OnChange within the refresh.
func changes(t *testing.T, db DB, updatedAt bool) {
	table := db.table(t, db.Soketi)
	if updatedAt {
		db.Exec(t, fmt.Sprintf(db.UpdatedAt, table))
	}
	db.soketiRow(t, table, "first", "first-key", 1, 10)
	s, rec := db.store(t, table)
	if _, ok := s.AppByKey("first-key"); !ok {
		t.Fatal("the first app is not there after Start")
	}

	db.soketiRow(t, table, "added", "added-key", 1, 10)
	rec.waitFor(t, "the app added", func(c herald.AppChange) bool { return c.Old == nil && c.New != nil && c.New.ID == "added" })
	if a, ok := s.AppByKey("added-key"); !ok || a.Secret != "secret-added" {
		t.Fatalf("AppByKey(added-key) = %v, %v after its change was reported", a, ok)
	}

	db.Exec(t, fmt.Sprintf("UPDATE %s SET %s = 0 WHERE id = 'added'", table, db.Quote("enabled")))
	c := rec.waitFor(t, "the app disabled", func(c herald.AppChange) bool { return c.New != nil && c.New.ID == "added" && c.New.Disabled })
	if c.Old == nil || c.Old.Disabled {
		t.Errorf("the disabling change's Old = %+v, want the enabled app", c.Old)
	}

	db.Exec(t, fmt.Sprintf("UPDATE %s SET max_connections = 77 WHERE id = 'first'", table))
	rec.waitFor(t, "the limit changed", func(c herald.AppChange) bool {
		return c.New != nil && c.New.ID == "first" && c.New.Limits.MaxConnections == 77
	})
	if a, _ := s.AppByID("first"); a.Limits.MaxConnections != 77 {
		t.Errorf("max_connections = %d, want 77", a.Limits.MaxConnections)
	}

	db.Exec(t, fmt.Sprintf("DELETE FROM %s WHERE id = 'added'", table))
	rec.waitFor(t, "the app deleted", func(c herald.AppChange) bool { return c.New == nil && c.Old != nil && c.Old.ID == "added" })
	if _, ok := s.AppByKey("added-key"); ok {
		t.Error("the deleted app's key is still found")
	}
	if st := s.Status(); !st.Up || st.Apps != 1 || s.Stale() {
		t.Errorf("status %+v, stale %v; want up with 1 app", st, s.Stale())
	}
}

// writer: the apps API's writes through the source's Writer, as the store then reads them.
func writer(t *testing.T, db DB) {
	table := db.table(t, db.Soketi)
	s, _ := db.store(t, table)
	w, ok := s.Source().(appstore.Writer)
	if !ok {
		t.Fatal("the source is not an appstore.Writer")
	}
	ctx := context.Background()
	a := herald.App{ID: "written", Key: "written-key", Secret: "s1", EnableClientMessages: true,
		AllowedOrigins: []string{"https://a.example", "*.b.example"},
		Limits:         herald.Limits{MaxConnections: 5, MaxEventPayloadBytes: 20 << 10}}
	if err := w.Insert(ctx, a); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	if err := w.Insert(ctx, a); !errors.Is(err, appstore.ErrExists) {
		t.Errorf("Insert of the same id: %v, want ErrExists", err)
	}
	if err := s.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := s.AppByID("written")
	if !ok {
		t.Fatal("the inserted app is not found after Reload")
	}
	want := a
	want.AllowedOrigins = got.AllowedOrigins // allowed_origins is an optional column: absent here
	want.Limits = want.Limits.WithDefaults()
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("read back %+v, want %+v", *got, want)
	}

	db.Exec(t, fmt.Sprintf(`UPDATE %s SET max_read_req_per_sec = 42, webhooks = '[{"url":"https://hooks.example/x","event_types":["channel_occupied"]}]' WHERE id = 'written'`, table))
	a.Disabled, a.Secret = true, "s2"
	if err := w.Update(ctx, a); err != nil {
		t.Fatalf("Update: %v", err)
	}
	// What herald does not hold is left as it was.
	db.Exec(t, fmt.Sprintf(`DELETE FROM %s WHERE id = 'written' AND max_read_req_per_sec = 42 AND webhooks IS NOT NULL`, table))
	if err := s.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.AppByID("written"); ok {
		t.Fatal("Update changed max_read_req_per_sec or webhooks, which herald does not hold")
	}
	if err := w.Insert(ctx, a); err != nil {
		t.Fatalf("Insert again: %v", err)
	}
	if err := s.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AppByID("written"); !got.Disabled || got.Secret != "s2" {
		t.Errorf("after Update: %+v, want disabled with secret s2", *got)
	}
	if err := w.Update(ctx, herald.App{ID: "nobody", Key: "nobody-key", Secret: "x"}); !errors.Is(err, appstore.ErrNotFound) {
		t.Errorf("Update of an unknown id: %v, want ErrNotFound", err)
	}
	if err := w.Delete(ctx, "written"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := w.Delete(ctx, "written"); !errors.Is(err, appstore.ErrNotFound) {
		t.Errorf("Delete twice: %v, want ErrNotFound", err)
	}
}

// badRow: a row that is no app (an empty id) is skipped; the others are served and the store
// is up.
func badRow(t *testing.T, db DB) {
	table := db.table(t, db.Soketi)
	db.soketiRow(t, table, "good", "good-key", 1, 10)
	db.soketiRow(t, table, "", "empty-id-key", 1, 10)
	s, rec := db.store(t, table)
	if _, ok := s.AppByKey("good-key"); !ok || s.Stale() || !s.Status().Up || len(s.Apps()) != 1 {
		t.Fatalf("with a bad row: good found %v, stale %v, status %+v; want the good app only, up", ok, s.Stale(), s.Status())
	}
	db.soketiRow(t, table, "later", "later-key", 1, 10)
	rec.waitFor(t, "an app added beside the bad row", func(c herald.AppChange) bool { return c.New != nil && c.New.ID == "later" })
}

// outage: with the database down the store serves the apps it knows and says it is stale;
// once it is back, the store recovers by itself and sees what changed.
func outage(t *testing.T, db DB) {
	table := db.table(t, db.Soketi)
	db.soketiRow(t, table, "known", "known-key", 1, 10)
	s, rec := db.store(t, table)
	db.Stop(t)
	eventually(t, "the store stale with the database down", s.Stale)
	if _, ok := s.AppByKey("known-key"); !ok {
		t.Fatal("the known app is not served with the database down")
	}
	if st := s.Status(); st.Up || st.LastError == "" || st.Errors == 0 {
		t.Errorf("status with the database down: %+v; want down with its error", st)
	}
	db.Start(t)
	eventually(t, "the store up again", func() bool { return !s.Stale() && s.Status().Up })
	db.soketiRow(t, table, "after", "after-key", 1, 10)
	rec.waitFor(t, "an app added after the outage", func(c herald.AppChange) bool { return c.New != nil && c.New.ID == "after" })
}

// soketiHooks is a webhooks column as Soketi's docs write it: an HTTP webhook with headers and
// a filter, a Lambda one (herald leaves it out), one with a URL that is no http URL (left
// out), and one with an event type Soketi does not have beside one it has (the typo ignored).
const soketiHooks = `[{"url": "https://hooks.example/a", "event_types": ["channel_occupied", "member_added"],
  "headers": {"Authorization": "Bearer t0ken", "X-Count": 3},
  "filter": {"channel_name_starts_with": "presence-", "channel_name_ends_with": "-vip"}},
 {"lambda_function": "my-function", "region": "us-east-1", "event_types": ["channel_occupied"]},
 {"url": "ftp://hooks.example/c", "event_types": ["channel_occupied"]},
 {"url": "https://hooks.example/b", "event_types": ["channel_vacated", "channel_ocupied"]}]`

// webhooks: the webhooks column of Soketi's table is read into the app's webhooks; what
// herald cannot send is left out and counted, the app served all the same; a change of the
// column is a change of the app; an insert writes the app's webhooks.
func webhooks(t *testing.T, db DB) {
	table := db.table(t, db.Soketi)
	db.soketiRow(t, table, "hooked", "hooked-key", 1, 10)
	db.soketiRow(t, table, "broken", "broken-key", 1, 10)
	db.soketiRow(t, table, "none", "none-key", 1, 10)
	db.Exec(t, fmt.Sprintf("UPDATE %s SET webhooks = '%s' WHERE id = 'hooked'", table, soketiHooks))
	db.Exec(t, fmt.Sprintf(`UPDATE %s SET webhooks = '{"url": "https://hooks.example/x"}' WHERE id = 'broken'`, table))
	db.Exec(t, fmt.Sprintf("UPDATE %s SET webhooks = NULL WHERE id = 'none'", table))
	s, rec := db.store(t, table)
	want := []herald.Webhook{
		{URL: "https://hooks.example/a", EventTypes: []string{"channel_occupied", "member_added"},
			Headers: map[string]string{"Authorization": "Bearer t0ken", "X-Count": "3"},
			Filter:  herald.WebhookFilter{ChannelNameStartsWith: "presence-", ChannelNameEndsWith: "-vip"}},
		{URL: "https://hooks.example/b", EventTypes: []string{"channel_vacated"}},
	}
	a, ok := s.AppByID("hooked")
	if !ok || !reflect.DeepEqual(a.Webhooks, want) {
		t.Fatalf("hooked: found %v, webhooks %+v; want %+v", ok, a, want)
	}
	for _, id := range []string{"broken", "none"} {
		if a, ok := s.AppByID(id); !ok || a.Webhooks != nil {
			t.Fatalf("%s: found %v, webhooks %+v; want the app, without webhooks", id, ok, a)
		}
	}
	if st := s.Status(); st.BadWebhooks != 2 || !st.Up || len(s.Apps()) != 3 {
		t.Fatalf("status %+v: want 3 apps up, 2 of them without some of their webhooks", st)
	}

	db.Exec(t, fmt.Sprintf(`UPDATE %s SET webhooks = '[{"url": "https://hooks.example/fixed", "event_types": ["member_removed"]}]' WHERE id = 'broken'`, table))
	rec.waitFor(t, "the webhooks column changed", func(c herald.AppChange) bool {
		return c.New != nil && c.New.ID == "broken" && len(c.New.Webhooks) == 1 && c.New.Webhooks[0].URL == "https://hooks.example/fixed"
	})
	eventually(t, "one app left with bad webhooks", func() bool { return s.Status().BadWebhooks == 1 })

	w := s.Source().(appstore.Writer)
	in := herald.App{ID: "inserted", Key: "inserted-key", Secret: "s", Webhooks: want}
	if err := w.Insert(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadApp(context.Background(), "inserted"); err != nil {
		t.Fatal(err)
	}
	if a, ok := s.AppByID("inserted"); !ok || !reflect.DeepEqual(a.Webhooks, want) {
		t.Fatalf("inserted: found %v, %+v; want its webhooks read back", ok, a)
	}
	// An update by the apps API leaves the column alone.
	in.Webhooks, in.Secret = nil, "s2"
	if err := w.Update(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadApp(context.Background(), "inserted"); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.AppByID("inserted"); a.Secret != "s2" || !reflect.DeepEqual(a.Webhooks, want) {
		t.Fatalf("after an update: %+v; want the new secret and the webhooks as they were", a)
	}
}
