// Package mysql is the app store on MySQL and MariaDB: a Source (appstore) over an apps
// table with Soketi's schema (or Sockudo's names for its columns), read with
// go-sql-driver/mysql. MySQL has no change notifications: the Store polls, cheaply when the
// table has an updated_at column (its fingerprint), else by reading every app.
//
// Source is safe for concurrent use; Close releases its connections.
package mysql
