package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	driver "github.com/go-sql-driver/mysql"

	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/appstoretest"
	"github.com/herald-rt/herald/appstore/mysql"
	"github.com/herald-rt/herald/internal/servicetest"
)

// soketiDDL is the table exactly as Soketi's documentation creates it for MySQL.
const soketiDDL = "CREATE TABLE IF NOT EXISTS `%s` (\n" +
	"    `id` varchar(255) NOT NULL,\n" +
	"    `key` varchar(255) NOT NULL,\n" +
	"    `secret` varchar(255) NOT NULL,\n" +
	"    `max_connections` integer(10) NOT NULL,\n" +
	"    `enable_client_messages` tinyint(1) NOT NULL,\n" +
	"    `enabled` tinyint(1) NOT NULL,\n" +
	"    `max_backend_events_per_sec` integer(10) NOT NULL,\n" +
	"    `max_client_events_per_sec` integer(10) NOT NULL,\n" +
	"    `max_read_req_per_sec` integer(10) NOT NULL,\n" +
	"    `webhooks` json,\n" +
	"    `max_presence_members_per_channel` tinyint(1) NULL,\n" +
	"    `max_presence_member_size_in_kb` tinyint(1) NULL,\n" +
	"    `max_channel_name_length` tinyint(1) NULL,\n" +
	"    `max_event_channels_at_once` tinyint(1) NULL,\n" +
	"    `max_event_name_length` tinyint(1) NULL,\n" +
	"    `max_event_payload_in_kb` tinyint(1) NULL,\n" +
	"    `max_event_batch_size` tinyint(1) NULL,\n" +
	"    `enable_user_authentication` tinyint(1) NOT NULL,\n" +
	"    PRIMARY KEY (`id`)\n" +
	");"

// sockudoDDL is the table Sockudo creates for MySQL.
const sockudoDDL = "CREATE TABLE IF NOT EXISTS `%s` (\n" +
	"    id VARCHAR(255) PRIMARY KEY,\n" +
	"    `key` VARCHAR(255) UNIQUE NOT NULL,\n" +
	"    secret VARCHAR(255) NOT NULL,\n" +
	"    max_connections INT UNSIGNED NOT NULL,\n" +
	"    enable_client_messages BOOLEAN NOT NULL DEFAULT FALSE,\n" +
	"    enabled BOOLEAN NOT NULL DEFAULT TRUE,\n" +
	"    max_backend_events_per_second INT UNSIGNED NULL,\n" +
	"    max_client_events_per_second INT UNSIGNED NOT NULL,\n" +
	"    max_read_requests_per_second INT UNSIGNED NULL,\n" +
	"    max_presence_members_per_channel INT UNSIGNED NULL,\n" +
	"    max_presence_member_size_in_kb INT UNSIGNED NULL,\n" +
	"    max_channel_name_length INT UNSIGNED NULL,\n" +
	"    max_event_channels_at_once INT UNSIGNED NULL,\n" +
	"    max_event_name_length INT UNSIGNED NULL,\n" +
	"    max_event_payload_in_kb INT UNSIGNED NULL,\n" +
	"    max_event_batch_size INT UNSIGNED NULL,\n" +
	"    enable_user_authentication BOOLEAN NULL,\n" +
	"    enable_watchlist_events BOOLEAN NULL,\n" +
	"    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,\n" +
	"    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP\n" +
	")"

// updatedAtDDL adds updated_at, kept current by MySQL, as docs/app-stores.md shows.
const updatedAtDDL = "ALTER TABLE `%s` ADD COLUMN updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)"

func TestConformance(t *testing.T) {
	srv := servicetest.MariaDB(t)
	appstoretest.Run(t, appstoretest.DB{
		Exec: func(t testing.TB, q string, args ...any) {
			t.Helper()
			cfg, err := driver.ParseDSN(srv.MySQLDSN())
			if err != nil {
				t.Fatal(err)
			}
			cfg.MultiStatements = true
			db, err := sql.Open("mysql", cfg.FormatDSN())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
		Param:     func(int) string { return "?" },
		Quote:     func(n string) string { return "`" + n + "`" },
		Soketi:    soketiDDL,
		Sockudo:   sockudoDDL,
		UpdatedAt: updatedAtDDL,
		History:   "ALTER TABLE %s ADD COLUMN history JSON",
		Open: func(t testing.TB, table string) appstore.Source {
			s, err := mysql.Open(context.Background(), mysql.Config{DSN: srv.MySQLDSN(), Table: table})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Stop:  func(t testing.TB) { srv.Stop(t) },
		Start: func(t testing.TB) { srv.Start(t) },
	})
}
