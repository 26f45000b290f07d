// Package wstest is a minimal, blocking WebSocket client for herald's tests: raw frames over
// a real TCP socket, so tests can send what pusher-js never would (bad frames, binary
// messages, unanswered pings) and see exactly what the server writes back.
// A Client is used by one goroutine at a time.
package wstest
