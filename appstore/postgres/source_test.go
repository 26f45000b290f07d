package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/appstoretest"
	"github.com/herald-rt/herald/appstore/postgres"
	"github.com/herald-rt/herald/internal/servicetest"
)

// soketiDDL is the table exactly as Soketi's documentation creates it for PostgreSQL.
const soketiDDL = `CREATE TABLE IF NOT EXISTS %s (
    id varchar(255) PRIMARY KEY,
    "key" varchar(255) NOT NULL,
    secret varchar(255) NOT NULL,
    max_connections integer NOT NULL,
    enable_client_messages smallint NOT NULL,
    "enabled" smallint NOT NULL,
    max_backend_events_per_sec integer NOT NULL,
    max_client_events_per_sec integer NOT NULL,
    max_read_req_per_sec integer NOT NULL,
    max_presence_members_per_channel integer DEFAULT NULL,
    max_presence_member_size_in_kb integer DEFAULT NULL,
    max_channel_name_length integer DEFAULT NULL,
    max_event_channels_at_once integer DEFAULT NULL,
    max_event_name_length integer DEFAULT NULL,
    max_event_payload_in_kb integer DEFAULT NULL,
    max_event_batch_size integer DEFAULT NULL,
    webhooks json,
    enable_user_authentication smallint NOT NULL
)`

// sockudoDDL is the table Sockudo creates for PostgreSQL.
const sockudoDDL = `CREATE TABLE IF NOT EXISTS %s (
    id VARCHAR(255) PRIMARY KEY,
    key VARCHAR(255) UNIQUE NOT NULL,
    secret VARCHAR(255) NOT NULL,
    max_connections INTEGER NOT NULL,
    enable_client_messages BOOLEAN NOT NULL DEFAULT FALSE,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    max_backend_events_per_second INTEGER,
    max_client_events_per_second INTEGER NOT NULL,
    max_read_requests_per_second INTEGER,
    max_presence_members_per_channel INTEGER,
    max_presence_member_size_in_kb INTEGER,
    max_channel_name_length INTEGER,
    max_event_channels_at_once INTEGER,
    max_event_name_length INTEGER,
    max_event_payload_in_kb INTEGER,
    max_event_batch_size INTEGER,
    enable_user_authentication BOOLEAN,
    enable_watchlist_events BOOLEAN,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
)`

// updatedAtDDL adds updated_at, kept current by a trigger, as docs/app-stores.md shows.
const updatedAtDDL = `ALTER TABLE %[1]s ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
CREATE OR REPLACE FUNCTION %[1]s_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.updated_at := clock_timestamp(); RETURN NEW; END $$;
CREATE TRIGGER %[1]s_touch BEFORE UPDATE ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_touch();`

func harness(t *testing.T) (*servicetest.SQL, appstoretest.DB) {
	srv := servicetest.Postgres(t)
	exec := func(t testing.TB, q string, args ...any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), appstoretest.Wait)
		defer cancel()
		c, err := pgx.Connect(ctx, srv.PostgresURL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return srv, appstoretest.DB{
		Exec:      exec,
		Param:     func(i int) string { return fmt.Sprintf("$%d", i) },
		Quote:     func(n string) string { return `"` + n + `"` },
		Soketi:    soketiDDL,
		Sockudo:   sockudoDDL,
		UpdatedAt: updatedAtDDL,
		History:   "ALTER TABLE %s ADD COLUMN history jsonb",
		Open: func(t testing.TB, table string) appstore.Source {
			s, err := postgres.Open(context.Background(), postgres.Config{URL: srv.PostgresURL(), Table: table})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Stop:  func(t testing.TB) { srv.Stop(t) },
		Start: func(t testing.TB) { srv.Start(t) },
	}
}

func TestConformance(t *testing.T) {
	_, db := harness(t)
	appstoretest.Run(t, db)
}

// TestNotify: with the trigger installed, a change reaches the store by LISTEN/NOTIFY,
// long before its poll (an hour here) would find it.
func TestNotify(t *testing.T) {
	srv, db := harness(t)
	table := "notified"
	db.Exec(t, fmt.Sprintf(soketiDDL, table))
	src, err := postgres.Open(context.Background(), postgres.Config{URL: srv.PostgresURL(), Table: table, InstallTrigger: true})
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan herald.AppChange, 16)
	s := appstore.New(appstore.Config{Kind: "postgres", Refresh: time.Hour,
		OnChange: func(cs []herald.AppChange) {
			for _, c := range cs {
				changed <- c
			}
		}})
	if err := s.Start(src); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(appstoretest.Wait)
	for !s.Status().Listening {
		if time.Now().After(deadline) {
			t.Fatal("the store does not listen")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	db.Exec(t, fmt.Sprintf(`INSERT INTO %s (id, "key", secret, max_connections, enable_client_messages, "enabled",
		max_backend_events_per_sec, max_client_events_per_sec, max_read_req_per_sec, enable_user_authentication)
		VALUES ('n1', 'n1-key', 's', -1, 0, 1, -1, -1, -1, 0)`, table))
	select {
	case c := <-changed:
		if c.New == nil || c.New.ID != "n1" {
			t.Fatalf("change %+v, want n1 added", c)
		}
	case <-time.After(appstoretest.Wait):
		t.Fatal("no change notified")
	}
	db.Exec(t, fmt.Sprintf(`UPDATE %s SET "enabled" = 0 WHERE id = 'n1'`, table))
	select {
	case c := <-changed:
		if c.New == nil || !c.New.Disabled {
			t.Fatalf("change %+v, want n1 disabled", c)
		}
	case <-time.After(appstoretest.Wait):
		t.Fatal("no change notified")
	}
}
