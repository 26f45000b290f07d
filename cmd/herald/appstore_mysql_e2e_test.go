package main

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql" // database/sql's "mysql"

	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
)

// soketiMySQL is the apps table exactly as Soketi's documentation creates it for MySQL.
const soketiMySQL = "CREATE TABLE IF NOT EXISTS `apps` (`id` varchar(255) NOT NULL, `key` varchar(255) NOT NULL, " +
	"`secret` varchar(255) NOT NULL, `max_connections` integer(10) NOT NULL, `enabled` tinyint(1) NOT NULL, " +
	"`enable_client_messages` tinyint(1) NOT NULL, `max_backend_events_per_sec` integer(10) NOT NULL, " +
	"`max_client_events_per_sec` integer(10) NOT NULL, `max_read_req_per_sec` integer(10) NOT NULL, `webhooks` json, " +
	"`max_presence_members_per_channel` tinyint(1) NULL, `max_presence_member_size_in_kb` tinyint(1) NULL, " +
	"`max_channel_name_length` tinyint(1) NULL, `max_event_channels_at_once` tinyint(1) NULL, " +
	"`max_event_name_length` tinyint(1) NULL, `max_event_payload_in_kb` tinyint(1) NULL, `max_event_batch_size` tinyint(1) NULL, " +
	"`enable_user_authentication` tinyint(1) NOT NULL, PRIMARY KEY (`id`))"

// TestAppStoreMySQL: a node on Soketi's table in MariaDB, which has no notifications, sees an
// app inserted and disabled within its poll (300 ms here): the new key connects, and the
// disabled app's connection is closed with 4003.
func TestAppStoreMySQL(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts MariaDB and a node")
	}
	db := servicetest.MariaDB(t)
	conn, err := sql.Open("mysql", db.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.ExecContext(context.Background(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(soketiMySQL)
	n := startServe(t, "m", "--app-store-mysql-dsn", db.MySQLDSN(), "--app-store-refresh", "300ms")
	until(t, "the node up with the app store", func() bool {
		h := n.storeHealth(t)
		return h.Status == "ok" && h.AppStore != nil && h.AppStore.Up && h.AppStore.Kind == "mysql"
	})
	if _, code := dialKey(t, n, "m1-key"); code != 4001 {
		t.Fatalf("m1-key before it exists: close %d, want 4001", code)
	}
	exec("INSERT INTO apps (id, `key`, secret, max_connections, `enabled`, enable_client_messages, max_backend_events_per_sec, " +
		"max_client_events_per_sec, max_read_req_per_sec, webhooks, enable_user_authentication) " +
		"VALUES ('m1', 'm1-key', 'm1-secret', -1, 1, 1, -1, -1, -1, '[]', 0)")
	var open *wstest.Client
	until(t, "the new app's key to connect", func() bool { cl, _ := dialKey(t, n, "m1-key"); open = cl; return cl != nil })
	exec("UPDATE apps SET `enabled` = 0 WHERE id = 'm1'")
	if code, err := open.ExpectClose(clusterWait); err != nil || code != 4003 {
		t.Fatalf("the disabled app's connection: close %d, %v; want 4003", code, err)
	}
	if err := n.stop(); err != nil {
		t.Error(err)
	}
}
