package broker

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

// Counters are the counters behind an engine's herald.BrokerStats.
type Counters struct {
	Sent, SentBytes         atomic.Uint64 // messages handed to the bus by Publish, and their encoded size
	Received, ReceivedBytes atomic.Uint64 // messages handed to the handler, and their encoded size
	PublishErrors           atomic.Uint64 // Publish calls that failed, and accepted messages the bus refused
	Dropped                 atomic.Uint64 // received messages dropped: queue full or undecodable
	Forged                  atomic.Uint64 // received messages refused: not authenticated by the secret (Auth)
	Replayed                atomic.Uint64 // received messages refused: authentic, but replayed or stale (Auth)
	Reconnects              atomic.Uint64 // times the bus connection came back after a loss
	UnknownVersion          atomic.Uint64 // received messages refused: an envelope version this node does not know
	lastUnknown             atomic.Pointer[VersionError]
}

// CountSent counts one message of n encoded bytes handed to the bus.
func (c *Counters) CountSent(n int) {
	c.Sent.Add(1)
	c.SentBytes.Add(uint64(n))
}

// CountReceived counts one message of n encoded bytes handed to the handler.
func (c *Counters) CountReceived(n int) {
	c.Received.Add(1)
	c.ReceivedBytes.Add(uint64(n))
}

// Stats returns the counters as BrokerStats; the engine fills in Connected and Interests.
func (c *Counters) Stats() herald.BrokerStats {
	return herald.BrokerStats{MessagesSent: c.Sent.Load(), BytesSent: c.SentBytes.Load(),
		MessagesReceived: c.Received.Load(), BytesReceived: c.ReceivedBytes.Load(), PublishErrors: c.PublishErrors.Load(),
		Dropped: c.Dropped.Load(), Forged: c.Forged.Load(), Replayed: c.Replayed.Load(), Reconnects: c.Reconnects.Load(),
		UnknownVersion: c.UnknownVersion.Load(), LastUnknownVersion: c.lastUnknownVersion()}
}

// Receive decodes one message received from the bus, counts it and hands it to h, which
// owns it (its Payload aliases data). Bytes that do not decode are counted as dropped, those
// of an envelope version this node does not know as UnknownVersion (the latest kept for
// BrokerStats.LastUnknownVersion, the node logs it). With
// an Auth (a cluster secret) the message must be sealed: what Auth.Open refuses is counted
// as forged or replayed, and dropped.
func (c *Counters) Receive(data []byte, a *Auth, h herald.BusHandler) {
	var msg herald.BusMessage
	var err error
	if a != nil {
		msg, err = a.Open(data)
	} else {
		msg, err = DecodeMessage(data)
	}
	var ve *VersionError
	switch {
	case err == nil && msg.Kind == herald.BusDrained:
		c.Dropped.Add(1) // not a kind a node sends
		return
	case err == nil:
	case errors.As(err, &ve):
		c.UnknownVersion.Add(1)
		c.lastUnknown.Store(ve)
		return
	case errors.Is(err, ErrForged):
		c.Forged.Add(1)
		return
	case errors.Is(err, ErrReplayed):
		c.Replayed.Add(1)
		return
	default:
		c.Dropped.Add(1)
		return
	}
	c.CountReceived(len(data))
	h(msg)
}

// Drained tells h that the engine has handed over every message it had ready: a
// herald.BusDrained message.
func Drained(h herald.BusHandler) { h(herald.BusMessage{Kind: herald.BusDrained}) }

// MaxDrain bounds how many messages Deliver hands over between two drained calls, and
// MaxDrainTime how long it takes (checked every 64 messages), so that a bus that never
// pauses cannot hold back what was received.
const (
	MaxDrain     = 1024
	MaxDrainTime = time.Millisecond
)

// Deliver is the loop of an engine's delivery goroutine, the one that calls the handler:
// until stop is closed it takes each received message from ctl and from in, each in arrival
// order, and passes it to deliver (Counters.Receive, for an engine that queues encoded
// messages); after each drain, once both are empty (or MaxDrain messages or MaxDrainTime
// on), it calls drained (Drained, with the engine's handler). ctl is the internal keys'
// queue (Internal): the state stream's heartbeats must not wait behind, nor be dropped
// with, a flood of events; nil when the engine keeps one queue.
func Deliver[T any](ctl, in <-chan T, stop <-chan struct{}, deliver func(T), drained func()) {
	for {
		select {
		case m := <-ctl:
			deliver(m)
		case m := <-in:
			deliver(m)
		case <-stop:
			return
		}
		start := time.Now()
	drain:
		for i := 1; i < MaxDrain; i++ {
			if i%64 == 0 && time.Since(start) > MaxDrainTime {
				break
			}
			select {
			case m := <-ctl:
				deliver(m)
			case m := <-in:
				deliver(m)
			default:
				break drain
			}
		}
		drained()
	}
}

// lastUnknownVersion is the latest message refused for its version, as BrokerStats has it.
func (c *Counters) lastUnknownVersion() herald.WireVersionSeen {
	if e := c.lastUnknown.Load(); e != nil {
		return herald.WireVersionSeen{Node: e.Node, Version: int(e.Version)}
	}
	return herald.WireVersionSeen{}
}
