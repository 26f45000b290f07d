// Package appstoretest is the conformance suite of herald's app stores: Contract checks the
// herald.AppStore contract on any store (the file and environment's herald.StaticApps, and
// an appstore.Store), and Run checks an appstore.Store over a database's Source against a
// real server: Soketi's and Sockudo's tables as their docs create them, changes made in the
// table reaching the store within its refresh, the apps API's writes, the webhooks and
// history columns, and an outage of the database (the store serves what it knows, says it
// is stale, and recovers by itself).
package appstoretest
