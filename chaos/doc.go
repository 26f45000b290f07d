// Package chaos is herald's fault-injection harness: it starts herald nodes (one alone, or
// three over a redis-server or a three-server NATS cluster with JetStream), publishers that
// publish numbered events over REST with idempotency keys and retry every one until it is
// acknowledged (and, optionally, a producer that writes numbered records to a Kafka topic
// that herald ingests), and subscribers that reconnect and recover as pusher-js with herald's
// recovery helper does. A nemesis injects faults on a schedule drawn from a seed: SIGKILL
// and restart of a node, SIGSTOP and SIGCONT, restarts and kills of a bus server, subscriber
// connections cut, and partitions of a node from its bus or from its clients (each node in a
// network namespace of its own, reached through veth pairs the harness makes and removes).
// A checker then reads what every subscriber received and reports, per channel, the
// acknowledged events lost, the duplicates, the reorders and the recoveries that failed.
//
// Run is the whole run; cmd/herald-chaos is its command line and docs/chaos.md its manual.
// Every process the harness starts is stopped by its pid, every namespace and link it makes
// is removed, before Run returns.
package chaos
