// Package pusher owns the Pusher Channels wire protocol (version 7) with no I/O: decoding the
// frames clients send, validating channel and event names, checking channel, presence and
// user signatures and signed REST requests, and encoding every frame the server sends.
//
// Everything here is pure: functions read their arguments, allocate only what they return and
// keep no state, so all of it is safe for concurrent use. Decoders return *herald.Error values
// (herald.CodeInvalid, herald.CodeTooLarge, herald.CodeUnauthorized) whose messages are meant
// for the client. Encoders are append-style and allocation-free apart from growing dst; they
// produce compact JSON that pusher-js 8 parses (see docs/protocol.md for the shapes).
package pusher
