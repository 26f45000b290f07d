package config

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// AppStoreConfig keeps the apps in a database table (package appstore) instead of the file
// and the environment: Soketi's apps table, which every node reads and watches, so that an
// app added, changed or disabled there reaches every node without a restart. Off unless
// Postgres.URL or MySQL.DSN is set.
type AppStoreConfig struct {
	Postgres PostgresStoreConfig
	MySQL    MySQLStoreConfig
	// Table is the apps table: Soketi's default "apps" (Sockudo's is "applications").
	Table string
	// Refresh is how often the table is polled: the only way MySQL's changes arrive, and
	// PostgreSQL's while its notifications are down.
	Refresh Duration
	// History are history rules for the apps whose ids match, after each app's own (its
	// history column): appstore_history.go.
	History []StoreHistory
}

// PostgresStoreConfig is app_store.postgres.
type PostgresStoreConfig struct {
	URL string // postgres://user:password@host:port/database
	// InstallTrigger creates the trigger that notifies herald of each change at start.
	InstallTrigger bool
}

// MySQLStoreConfig is app_store.mysql.
type MySQLStoreConfig struct {
	DSN string // user:password@tcp(host:port)/database
}

// On reports whether a database keeps the apps.
func (c AppStoreConfig) On() bool { return c.Postgres.URL != "" || c.MySQL.DSN != "" }

// Kind names the database.
func (c AppStoreConfig) Kind() string {
	if c.Postgres.URL != "" {
		return "postgres"
	}
	return "mysql"
}

func defaultAppStore() AppStoreConfig {
	return AppStoreConfig{Table: "apps", Refresh: Duration{5 * time.Second}}
}

var appStoreSettings = []setting{
	{"app_store.postgres.url", "PostgreSQL holding the apps table: postgres://user:password@host:port/database; empty = no database", func(c *Config) any { return &c.AppStore.Postgres.URL }},
	{"app_store.postgres.install_trigger", "at start, create the trigger that notifies every node of a change to the apps table", func(c *Config) any { return &c.AppStore.Postgres.InstallTrigger }},
	{"app_store.mysql.dsn", "MySQL or MariaDB holding the apps table: user:password@tcp(host:port)/database; empty = no database", func(c *Config) any { return &c.AppStore.MySQL.DSN }},
	{"app_store.table", "the apps table (Soketi's schema; Sockudo's table is applications)", func(c *Config) any { return &c.AppStore.Table }},
	{"app_store.refresh", "how often the apps table is polled for changes", func(c *Config) any { return &c.AppStore.Refresh }},
}

// appStore checks app_store.*: one database at most, an address that parses (never quoted:
// it holds a password), a plain table name; and, with a database, no apps from the file
// or the environment.
func (l *loader) appStore(c *Config) {
	s := &c.AppStore
	if s.Postgres.URL != "" {
		if _, err := pgxpool.ParseConfig(s.Postgres.URL); err != nil {
			l.problem("app_store.postgres.url", "cannot parse it: want postgres://user:password@host:port/database")
		}
	}
	if s.MySQL.DSN != "" {
		if err := l.check.MySQLDSN(s.MySQL.DSN); err != nil {
			l.problem("app_store.mysql.dsn", "%v", err)
		}
		if s.Postgres.URL != "" {
			l.problem("app_store.mysql.dsn", "set app_store.postgres.url or app_store.mysql.dsn, not both")
		}
	}
	if s.Postgres.InstallTrigger && s.Postgres.URL == "" {
		l.problem("app_store.postgres.install_trigger", "needs app_store.postgres.url")
	}
	switch {
	case s.Postgres.URL != "" && !l.check.TableName(true, s.Table):
		l.problem("app_store.table", "%q: want a plain name (letters, digits, '_'), optionally schema.table", s.Table)
	case s.Postgres.URL == "" && !l.check.TableName(false, s.Table):
		l.problem("app_store.table", "%q: want a plain name (letters, digits, '_')", s.Table)
	}
	l.longerThan("app_store.refresh", s.Refresh, 100*time.Millisecond)
	if !s.On() {
		return
	}
	if src, ok := l.from["apps"]; ok {
		l.add("apps", src, "with app_store set the apps are the database's: configure them there (or leave app_store unset)")
		return
	}
	c.Apps = nil // not the development app: the database's
}
