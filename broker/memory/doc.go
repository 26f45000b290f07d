// Package memory is the in-process cluster bus: a Bus that the Brokers of several simulated
// nodes attach to, routed by interest like the real engines. A single node uses a Bus with
// one Broker, where a publish finds no other node and costs a map lookup; cluster tests of
// the server attach several. Everything here is safe for concurrent use.
package memory
