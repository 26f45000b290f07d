package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
)

// soketiPostgres is the apps table exactly as Soketi's documentation creates it.
const soketiPostgres = `CREATE TABLE IF NOT EXISTS apps (
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

// pgExec runs a statement on the database.
func pgExec(t *testing.T, url, q string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// addSoketiApp inserts an app as a Soketi user would.
func addSoketiApp(t *testing.T, url, id string) {
	pgExec(t, url, `INSERT INTO apps (id, "key", secret, max_connections, enable_client_messages, "enabled", max_backend_events_per_sec,
		max_client_events_per_sec, max_read_req_per_sec, webhooks, enable_user_authentication)
		VALUES ($1, $2, $3, -1, 1, 1, -1, -1, -1, '[]', 0)`, id, id+"-key", id+"-secret")
}

// storeHealth is the detailed /health's app_store.
type storeHealth struct {
	Status   string
	AppStore *struct {
		Kind      string
		Up        bool
		Listening bool
		Apps      int
		LastError string `json:"last_error"`
	} `json:"app_store"`
}

func (n *node) storeHealth(t *testing.T) storeHealth {
	t.Helper()
	var h storeHealth
	if _, body, err := n.detail(t); err == nil {
		_ = json.Unmarshal(body, &h)
	}
	return h
}

// until polls ok until it holds, failing with what after clusterWait.
func until(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", clusterWait, what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// dialKey connects with key and returns the client once established, or the close code
// the node refused it with.
func dialKey(t *testing.T, n *node, key string) (*wstest.Client, int) {
	t.Helper()
	c, err := wstest.Dial(n.api, "/app/"+key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Read(clusterWait)
	if err != nil {
		c.Close()
		t.Fatalf("%s: key %s: %v", n.name, key, err)
	}
	if m.Event == "pusher:error" {
		code, _ := c.ExpectClose(clusterWait)
		c.Close()
		return nil, code
	}
	t.Cleanup(func() { c.Close() })
	return c, 0
}

// TestAppStorePostgres: two nodes read Soketi's apps table in PostgreSQL. An app inserted
// connects on both without a restart; an app disabled has its connections closed with 4003
// on both, one deleted with 4001; with the database down both serve the apps they know,
// refuse an unknown key with 4100 and say so in /health and the metrics; back up, they
// recover by themselves.
func TestAppStorePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts PostgreSQL and two nodes")
	}
	pg := servicetest.Postgres(t)
	url := pg.PostgresURL()
	pgExec(t, url, soketiPostgres)
	addSoketiApp(t, url, "one")
	flags := []string{"--app-store-postgres-url", url, "--app-store-postgres-install-trigger", "--app-store-refresh", "1s"}
	nodes := []*node{startServe(t, "a", flags...), startServe(t, "b", flags...)}
	for _, n := range nodes {
		until(t, n.name+" up with the app store", func() bool {
			h := n.storeHealth(t)
			return h.Status == "ok" && h.AppStore != nil && h.AppStore.Up && h.AppStore.Apps == 1 && h.AppStore.Listening
		})
	}
	var ones []*wstest.Client
	for _, n := range nodes {
		c, code := dialKey(t, n, "one-key")
		if c == nil {
			t.Fatalf("%s refused one-key with %d", n.name, code)
		}
		ones = append(ones, c)
		if _, code := dialKey(t, n, "two-key"); code != 4001 {
			t.Fatalf("%s: two-key before it exists: close %d, want 4001", n.name, code)
		}
	}

	addSoketiApp(t, url, "two")
	var twos []*wstest.Client
	for _, n := range nodes {
		until(t, n.name+" to accept the new app's key", func() bool {
			c, _ := dialKey(t, n, "two-key")
			if c != nil {
				twos = append(twos, c)
			}
			return c != nil
		})
	}

	pgExec(t, url, `UPDATE apps SET "enabled" = 0 WHERE id = 'one'`)
	for i, c := range ones {
		if code, err := c.ExpectClose(clusterWait); err != nil || code != 4003 {
			t.Fatalf("%s: one's connection after it was disabled: %d, %v; want 4003", nodes[i].name, code, err)
		}
		if _, code := dialKey(t, nodes[i], "one-key"); code != 4003 {
			t.Fatalf("%s: one-key disabled: close %d, want 4003", nodes[i].name, code)
		}
	}
	pgExec(t, url, `DELETE FROM apps WHERE id = 'two'`)
	for i, c := range twos {
		if code, err := c.ExpectClose(clusterWait); err != nil || code != 4001 {
			t.Fatalf("%s: two's connection after it was deleted: %d, %v; want 4001", nodes[i].name, code, err)
		}
	}

	addSoketiApp(t, url, "three")
	for _, n := range nodes {
		until(t, n.name+" to know three", func() bool { c, _ := dialKey(t, n, "three-key"); return c != nil })
	}
	pg.Stop(t)
	for _, n := range nodes {
		until(t, n.name+" to report the app store down", func() bool {
			h := n.storeHealth(t)
			return h.AppStore != nil && !h.AppStore.Up && h.AppStore.LastError != "" && h.Status == "ok"
		})
		// The public /health does not tell the database's host, user and name of the error.
		if _, body, err := n.get(t, "/health"); err != nil {
			t.Fatal(err)
		} else {
			wantPublicHealth(t, body, "ok")
		}
		if c, code := dialKey(t, n, "three-key"); c == nil {
			t.Fatalf("%s refused a known app's key with %d while the database is down", n.name, code)
		}
		if _, code := dialKey(t, n, "four-key"); code != 4100 {
			t.Fatalf("%s: an unknown key while the database is down: close %d, want 4100", n.name, code)
		}
		if v, ok := scrape(t, n, "herald_app_store_up"); !ok || v != 0 {
			t.Errorf("%s: herald_app_store_up %v (%v) with the database down, want 0", n.name, v, ok)
		}
	}
	pg.Start(t)
	addSoketiApp(t, url, "four")
	for _, n := range nodes {
		until(t, n.name+" to recover and know four", func() bool {
			h := n.storeHealth(t)
			if h.AppStore == nil || !h.AppStore.Up {
				return false
			}
			c, _ := dialKey(t, n, "four-key")
			return c != nil
		})
	}
	if v, _ := scrape(t, nodes[0], "herald_app_store_up"); v != 1 {
		t.Errorf("herald_app_store_up %v after the outage, want 1", v)
	}
	for _, n := range nodes {
		if err := n.stop(); err != nil {
			t.Errorf("%s: %v", n.name, err)
		}
	}
}
