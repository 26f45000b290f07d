// Package servicetest runs the real services that herald's tests talk to (redis-server,
// nats-server) as child processes on free loopback ports. A test gets a Server that answers,
// can stop and restart it on the same port (outage tests), and the process - exactly that
// pid - is killed on test cleanup. A missing binary fails the test with how to install it
// (scripts/test.sh installs both), except under -short, where the test is skipped.
//
// NATSClusterReplicated (natsreplicated.go) is a NATS cluster of nats-server
// NATSReplicatedVersion, newer than Debian's, for replicated JetStream streams: built from
// the Go module proxy once and cached.
//
// Pebble (pebble.go) is an ACME CA for the TLS tests, with its own DNS server, built from the
// Go module proxy once and cached.
//
// Kafka (kafka.go) is a real broker in KRaft mode run from its jars on Maven Central, fetched
// once with Maven and cached; one per test binary (SharedKafka), since a JVM takes seconds to
// start. Without java its tests are skipped; scripts/test.sh installs java and Maven.
// cmd/kafkabroker runs that broker for the suites that are not Go (test/js/kafka.mjs).
//
// A Server is used by one test goroutine at a time.
package servicetest
