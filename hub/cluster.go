package hub

import (
	"github.com/herald-rt/herald"
)

// UseBroker connects the hub to a cluster bus built with h.Receive as its handler. Call it
// once, after New and before the hub serves any connection or publish. Without it the hub is
// a single node and nothing of the cluster is on its paths.
func (h *Hub) UseBroker(b herald.Broker) { h.bus = b }

// Receive is the herald.BusHandler of the hub's broker: it delivers a message another node
// published to this node's subscribers.
func (h *Hub) Receive(msg herald.BusMessage) {}
