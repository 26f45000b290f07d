// Package appstore keeps herald's apps in a database table, with Soketi's schema, without
// a database on the hot path: a Store holds every app in an immutable snapshot behind an
// atomic pointer (a lookup is one atomic load and one map read) and keeps it fresh from its
// Source: by the source's change notifications where it has them (PostgreSQL's
// LISTEN/NOTIFY, appstore/postgres), and by polling every Config.Refresh (a cheap
// fingerprint of an updated_at column where the table has one, else a full read). Each
// change is handed to Config.OnChange, so that the server closes the connections of a
// disabled or deleted app and applies new limits.
//
// While the source is unreachable the Store serves the snapshot it has, reports itself
// Stale (herald.AppStoreStale) and down in Status, and catches up by itself once the source
// answers again.
//
// The columns (Soketi's, Sockudo's names for the same, and herald's optional ones) and how
// each becomes a field of herald.App are in columns.go, the JSON ones in webhooks.go and
// history.go (an app's history rules); appstore/postgres and appstore/mysql read and write
// them. appstore/appstoretest is the conformance suite every store passes.
//
// Store is safe for concurrent use. Start starts its goroutines; Close stops them.
package appstore
