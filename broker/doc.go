// Package broker holds what the cluster bus engines (memory, nats, redis) share: the binary
// encoding of a herald.BusMessage on the bus, the escaping of (app, channel) into one bus
// subject, and the interest table that counts a node's references to each channel and runs
// at most one bus operation per channel at a time.
//
// Everything here is safe for concurrent use unless its doc comment says otherwise.
package broker
