package herald

import (
	"encoding/json"
	"time"
)

// Event is one message published to a channel, by the REST API, a client or a bus.
type Event struct {
	Name    string
	Channel string
	Data    string // always a string on the wire to clients
	// SocketID, when set, is excluded from delivery (the publisher's own connection).
	SocketID string
	// UserID is set on client events sent on presence channels.
	UserID string
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
