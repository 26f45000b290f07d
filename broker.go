package herald

import (
	"context"
	"time"
)

// Broker is one node's connection to the cluster bus: it carries messages that a node
// publishes for a channel to the other nodes that have local subscribers to that channel.
// broker/nats and broker/redis connect the nodes of a cluster; broker/memory is a bus inside
// one process, on which tests run several nodes (the herald binary does not link it). A
// single node has no Broker: its cluster.Local delivers its publishes itself. Every engine
// passes broker/brokertest.
//
// Received messages are handed to the BusHandler the engine was built with. The handler is
// called from the broker's own goroutine (one per broker in every engine here), never from
// Publish; messages one node published for one (app, channel) reach it in publish order. The
// handler must not block for long: the engines queue a bounded number of received messages
// and drop (and count, see BrokerStats.Dropped) what arrives while that queue is full; the
// internal keys' messages (app id "") have a queue of their own. After handing over what it
// had ready the engine calls the handler with a BusDrained signal, so a receiver can send
// what one drain brought in one batch.
//
// All methods are safe for concurrent use.
type Broker interface {
	// Publish sends msg to every node that has interest in (msg.App, msg.Channel), this one
	// included: a node delivers to its own subscribers what the bus brings back, so every
	// node sees one channel's messages in the one order the bus gave them, whichever node
	// published each. Publish fills msg.Node with this broker's node id. msg.Payload must
	// not be modified afterwards: the in-memory engine hands the same bytes to the
	// receiving nodes.
	//
	// Publish never waits for a round trip: it hands msg to the connection's outbound
	// pipeline, where concurrent publishes share writes and round trips, and returns. nil
	// means "accepted for sending", not "delivered": the bus is at most once. When the bus
	// is known to be unreachable it returns at once an error with code CodeUnavailable, and
	// when the outbound pipeline stays full until ctx is done, an error with code CodeBusy;
	// in both cases msg was not sent. Flush waits until accepted messages are on the bus.
	Publish(ctx context.Context, msg BusMessage) error

	// Flush returns once every message this broker's Publish accepted before the call has
	// been processed by the bus server. The server hands a message to the receiving nodes'
	// connections before it processes what is sent after it, so a message that any node
	// publishes after Flush returns reaches every receiver after those: a REST publish is
	// answered only after Flush, and publishes that a client sends one after another
	// through different nodes arrive in its order. Concurrent calls share round trips: one
	// round trip answers every Flush waiting when it begins, however many.
	//
	// It returns an error with code CodeUnavailable when the bus is down or the broker is
	// closed, or when the round trip, or the sending of a message it waits for, failed
	// (that message may be lost: the bus is at most once); and ctx's error when ctx is done
	// first. A message lost in a failure that the bus had recovered from before Flush was
	// called (another round trip succeeded in between) is counted in PublishErrors but may
	// go unreported here. The in-memory engine delivers within Publish: its Flush returns
	// at once.
	Flush(ctx context.Context) error

	// Subscribe adds one reference to this node's interest in (app, channel). Interest is
	// counted: the node stays subscribed on the bus from the first Subscribe until as many
	// Unsubscribes. Subscribe returns once the interest is in place on the bus, so a
	// message another node publishes after Subscribe returns nil is received. Every call
	// must be matched by one Unsubscribe, even when it returned an error: the reference
	// is kept, and the engine restores the interest when the bus comes back. An error
	// (CodeUnavailable when the bus is down, or ctx's) says only that the interest is not
	// confirmed yet.
	Subscribe(ctx context.Context, app, channel string) error

	// Unsubscribe drops one reference taken by Subscribe. On the last one it removes the
	// interest from the bus and returns once the bus has it, so nothing published after
	// it returns is delivered here; messages already in flight may still reach the
	// handler, which must ignore channels it no longer serves.
	Unsubscribe(ctx context.Context, app, channel string) error

	// Connected reports whether the bus is reachable now.
	Connected() bool

	// Stats returns the broker's counters since it was built.
	Stats() BrokerStats

	// Close disconnects from the bus and stops every goroutine the broker started, waiting
	// at most until ctx is done. It is idempotent; after it, Publish and Subscribe fail, and
	// Flush fails with code CodeUnavailable.
	Close(ctx context.Context) error
}

// BusHandler receives the messages other nodes published for channels this node has interest
// in. It owns msg: neither msg's strings nor its Payload are reused by the broker.
type BusHandler func(msg BusMessage)

// BusKind says what a bus message asks the receiving node to do, and so which part of the
// node receives it (cmd/herald registers each part's handler for its kinds on a broker.Mux).
// Brokers carry it without interpreting it; a receiver ignores kinds it does not know, so
// nodes of different versions can share a bus. The values are on the wire: they never
// change, and a value retired is not used again.
type BusKind uint8

// The cluster layer's bus message kinds (cluster.Replicated). 2 is retired (it was a user's messages, never sent: sending
// to a user is a BusEvent on the user's channel). Parts other than the cluster layer define their own
// kinds from 32 up (console.BusKind).
const (
	// BusDrained is never on the bus: an engine calls its handler with a message of this
	// kind, nothing else set, each time it has handed over every received message it had
	// ready (one or many), so a receiver may hold what it got until then and send each
	// connection everything one drain brought in one write. Received from the bus, it is
	// dropped as undecodable.
	BusDrained BusKind = 0
	// BusEvent: deliver Payload to the subscribers of Channel, except ExcludeSocket.
	BusEvent BusKind = 1
	// BusState: a node's share of the cluster's state (subscription counts, presence
	// members), its heartbeat and its requests for the others' shares; on an internal key
	// that every node has interest in. The payload's encoding is the cluster layer's (cluster/wire.go).
	BusState BusKind = 3
	// BusCache: an event of a cache channel, for every node to keep (and deliver to its
	// subscribers); on an internal key that every node has interest in.
	BusCache BusKind = 4
	// BusTerminate: close the connections of a signed-in user on every node; on an
	// internal key that every node has interest in.
	BusTerminate BusKind = 5
	// BusBundle: several events of Channel, published together, in one message: each
	// delivered in turn as a BusEvent would be. Sent only while every live node announces
	// that it reads them (the cluster layer's features); the payload's encoding is the
	// cluster layer's (cluster/bundle.go).
	BusBundle BusKind = 6
)

// BusMessage is what one node sends the others through the bus. Payload is opaque to the
// broker: for BusEvent it is the complete, encoded WebSocket frame, so a receiving node
// hands it to its fan-out as it is.
type BusMessage struct {
	Kind    BusKind
	App     string // app id
	Channel string // routing key: nodes with interest in (App, Channel) receive the message
	Node    string // id of the node that published it; filled by Publish
	// ExcludeSocket, when set, is the socket id (on whatever node) that must not receive
	// the message: the publisher's own connection.
	ExcludeSocket string
	// Origin, when not 0, is the Unix time in nanoseconds at which the event's source
	// produced it (herald.Event.Origin), for the receiving nodes' latency metrics. Brokers
	// carry it without interpreting it.
	Origin int64
	// Epoch and Offset, when Offset is not 0, are the position of a history channel's event
	// (Position), given by History.Publish. Brokers carry them without interpreting them.
	Epoch  string
	Offset uint64
	// Key is the event's idempotency key (Event.Key); empty: none. History.Publish keeps a
	// keyed event once. A message without a position carries it to the receivers (wire
	// version 5), which drop a repeat; one with a position does not (its offset says it).
	Key     string
	Payload []byte
}

// BrokerStats are a broker's counters, for metrics and health.
type BrokerStats struct {
	Connected        bool
	MessagesSent     uint64 // messages handed to the bus by Publish
	BytesSent        uint64 // their encoded size
	MessagesReceived uint64 // messages received from other nodes and handed to the handler
	BytesReceived    uint64
	PublishErrors    uint64 // Publish calls that failed, and accepted messages the bus refused
	Dropped          uint64 // received messages dropped: handler queue full or undecodable
	// Queued is how many received messages wait for the handler now, of at most QueueCap:
	// a node whose queue stays full is behind on the bus.
	Queued, QueueCap int
	// Forged and Replayed count the received messages refused by a node with a cluster
	// secret (broker.Auth): not sealed with it (unauthenticated, altered, forged), or
	// authentic but received before or sent too long ago. Neither is in Dropped.
	Forged, Replayed uint64
	Reconnects       uint64 // times the bus connection came back after a loss
	Interests        int    // (app, channel) pairs this node has interest in now
	// UnknownVersion counts the received messages refused unread because their envelope
	// version is one this node does not know (a later release's); LastUnknownVersion is the
	// latest of them. Neither is in Dropped.
	UnknownVersion     uint64
	LastUnknownVersion WireVersionSeen
}

// WireVersionSeen is a wire version a node received and could not read, and who sent it ("":
// not known; the zero value: none).
type WireVersionSeen struct {
	Node    string
	Version int
}

// BusObserver observes the duration of each round trip a broker makes to its bus (subscribe
// and unsubscribe confirmations, publish pipelines where the bus replies, Flush round trips,
// periodic probes).
// It is called from the broker's goroutines and must be safe for concurrent use.
type BusObserver func(time.Duration)
