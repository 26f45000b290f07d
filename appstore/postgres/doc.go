// Package postgres is the app store on PostgreSQL: a Source (appstore) over an apps table
// with Soketi's schema (or Sockudo's names for its columns), read with pgx. It hears of
// changes by LISTEN on a channel that a trigger notifies (TriggerSQL, installed by Open when
// Config.InstallTrigger is set), and offers a fingerprint for polling when the table has an
// updated_at column.
//
// Source is safe for concurrent use; Close releases its pool.
package postgres
