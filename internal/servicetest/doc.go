// Package servicetest runs the real services that herald's tests talk to (redis-server,
// nats-server) as child processes on free loopback ports. A test gets a Server that answers,
// can stop and restart it on the same port (outage tests), and the process - exactly that
// pid - is killed on test cleanup. A missing binary fails the test with how to install it
// (scripts/test.sh installs both), except under -short, where the test is skipped.
//
// A Server is used by one test goroutine at a time.
package servicetest
