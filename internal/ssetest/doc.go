// Package ssetest reads a server-sent event stream (the console's /console/stream) for
// herald's tests: a Stream's own goroutine reads the events into a channel until the stream
// ends or the test is cleaned up.
package ssetest
