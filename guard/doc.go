// Package guard holds herald's admission control and rate limits: token buckets, a per-IP
// connection rate limiter, the memory guard with hysteresis and the per-app origin
// allow-list. Nothing here takes a lock shared by all connections: per-connection buckets
// belong to their connection's reader, the per-IP limiter is sharded, and the memory guard is
// read with one atomic load.
package guard
