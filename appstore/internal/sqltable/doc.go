// Package sqltable is what the SQL app stores (appstore/postgres, appstore/mysql) share: an
// apps table as Open found it (its columns, mapped by appstore.Map), the statements herald
// runs on it in each engine's spelling (a Dialect), and the reading of rows into apps.
// Each engine keeps what is its own: connecting, the information_schema query, change
// notifications, the fingerprint and the errors its driver returns.
//
// A Table is not changed after Describe and is safe for concurrent use.
package sqltable
