// Package backoff is herald's one exponential backoff: the wait before the next attempt at
// something that failed (a cluster bus reconnection, an ingest source's broker, a webhook
// request), doubling from a first wait up to a longest one, jittered as each caller asks so
// that many nodes retrying at once do not retry in step.
//
// A Policy is a value; Wait is safe for concurrent use.
package backoff
