// Package broker is the kit the cluster bus engines (memory, nats, redis) are built from: the
// binary encoding of a herald.BusMessage on the bus (a history event's position included),
// the escaping of (app, channel) into one bus subject, the interest table that counts a node's references to each channel and runs
// at most one bus operation per channel at a time, the configuration the networked engines
// share (Common, embedded in their Configs), their counters (Counters) and delivery loop
// (Deliver), their reconnection backoff, the Mux that routes what a node receives to the
// handler of each message's kind, and what their herald.History implementations share
// (CheckRule, NewEpoch; their conformance suite is broker/historytest).
//
// Everything here is safe for concurrent use unless its doc comment says otherwise.
package broker
