package herald

import (
	"encoding/json"
	"time"
)

// DefaultKeyWindow is how long an idempotency key (Event.Key) is remembered unless configured
// otherwise: a retry within it delivers nothing again.
const DefaultKeyWindow = 5 * time.Minute

// MaxKeyBytes bounds an idempotency key.
const MaxKeyBytes = 128

// ValidKey returns a CodeInvalid error naming what (the header or field the key came in) when
// key is not an idempotency key: 1 to MaxKeyBytes printable ASCII characters, no spaces.
func ValidKey(what, key string) error {
	if key == "" {
		return Errorf(CodeInvalid, "%s is empty", what)
	}
	if len(key) > MaxKeyBytes {
		return Errorf(CodeInvalid, "%s is %d bytes long, over the limit of %d", what, len(key), MaxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return Errorf(CodeInvalid, "%s has a character that is not printable ASCII at byte %d: want letters, digits and punctuation, no spaces", what, i)
		}
	}
	return nil
}

// Event is one message published to a channel, by the REST API, a client or a bus.
type Event struct {
	Name    string
	Channel string
	Data    string // always a string on the wire to clients
	// SocketID, when set, is excluded from delivery (the publisher's own connection).
	SocketID string
	// UserID is set on client events sent on presence channels.
	UserID string
	// Key, when not empty, is the event's idempotency key (ValidKey): of the events of one
	// app and channel with one Key, within the idempotency window, the first is delivered
	// and kept and the others are answered as it was and delivered nowhere (on any node of
	// a cluster where the channel keeps history; see docs/guarantees.md).
	Key string
	// Resent marks an event handed off again because the bus connection it was handed to
	// was lost (ingest.Reconnector): the node's own memory of its Key does not stop it, the
	// history store's still does (a channel with history gets it once, in its place).
	Resent bool
	// Origin, when not zero, is when the event's source produced it (an ingested record's
	// timestamp). The session then observes Origin → frames queued for the subscribers on
	// every node that delivers the event (session.Config.OriginLatency); it travels with the
	// event through the cluster bus. Zero: nothing is measured.
	Origin time.Time
}

// OriginNanos is the event's origin in Unix nanoseconds, 0 when it has none or one not after
// 1970 (a Kafka record without a timestamp says -1 ms).
func (ev *Event) OriginNanos() int64 {
	if ev.Origin.IsZero() {
		return 0
	}
	return max(ev.Origin.UnixNano(), 0)
}

// Member is one user in a presence channel.
type Member struct {
	UserID string
	Info   json.RawMessage // user_info as the client sent it; may be nil
}

// ChannelStat is what the REST API reports about an occupied channel.
type ChannelStat struct {
	Name              string
	SubscriptionCount int
	UserCount         int // presence channels only
}
