// Package memory is the in-process cluster bus: a Bus that the Brokers of several simulated
// nodes attach to, routed by interest like the real engines. A single node uses a Bus with
// one Broker, where a publish finds no other node and costs a map lookup; cluster tests of
// the server attach several. Beside each Broker a History (NewHistory) keeps the history
// channels' events in the Bus's memory, shared by every node of the Bus as a Redis server's
// keys are. Everything here is safe for concurrent use.
package memory
