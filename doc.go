// Package herald holds the domain vocabulary of the herald real-time server: apps, channel
// kinds, events, presence members and the one error type that every layer maps to a Pusher
// close code or an HTTP status. It does no I/O; subpackages adapt it to the wire (pusher),
// the sockets (ws), the Pusher session (session) on the cluster layer (cluster) and the fan-out (fanout) and the REST API (httpapi).
//
// Everything in this package is safe for concurrent use once constructed; App values are
// treated as immutable after configuration is loaded.
package herald
