package herald

import (
	"context"
	"strings"
	"time"
)

// HistoryRule says which channels of an app keep their recent events, so that a client that
// reconnects gets what it missed (recovery) and a backend can read them (the REST history
// endpoint): the Size last events, each for TTL.
type HistoryRule struct {
	// Channels is a glob over channel names: '*' matches any run of characters (none
	// included), every other character itself. "auction-*", "presence-room-*", "*".
	Channels string
	Size     int           // events kept per channel, at least 1
	TTL      time.Duration // how long each event is kept, more than 0
}

// Matches reports whether channel falls under the rule.
func (r HistoryRule) Matches(channel string) bool { return Glob(r.Channels, channel) }

// HistoryFor returns the first of the app's history rules that matches channel.
func (a *App) HistoryFor(channel string) (HistoryRule, bool) {
	for _, r := range a.History {
		if r.Matches(channel) {
			return r, true
		}
	}
	return HistoryRule{}, false
}

// Glob reports whether name matches pattern, where '*' matches any run of characters and
// every other character matches itself.
func Glob(pattern, name string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == name
	}
	if !strings.HasPrefix(name, pattern[:star]) {
		return false
	}
	name, pattern = name[star:], pattern[star+1:]
	for {
		next := strings.IndexByte(pattern, '*')
		if next < 0 {
			return strings.HasSuffix(name, pattern)
		}
		i := strings.Index(name, pattern[:next])
		if i < 0 {
			return false
		}
		name, pattern = name[i+next:], pattern[next+1:]
	}
}

// Position is where an event stands in its channel's history. Offset counts the channel's
// events from 1, one more per event, the same on every node of a cluster; Epoch names the
// history the offsets count in, and changes whenever that history is lost (a single node
// restarted, the Redis keys flushed, the JetStream stream recreated): offsets of two epochs
// cannot be compared. The zero Position is "none".
type Position struct {
	Epoch  string
	Offset uint64
}

// HistoryEntry is one retained event of a channel.
type HistoryEntry struct {
	Offset uint64
	At     int64  // Unix milliseconds at which the event was kept
	Frame  []byte // the event as delivered: one encoded WebSocket text frame
}

// HistoryPage is what History.Read returns.
type HistoryPage struct {
	// Latest is the channel's position now: its epoch and the offset of its last event (0
	// when the channel has had none in this epoch).
	Latest Position
	// Entries are the retained events after the offset asked for, oldest first. Their
	// offsets are consecutive but where events are gone: Entries[0].Offset is more than the
	// offset asked for plus one when the events in between are gone (past the rule's Size or
	// TTL), and a cluster node leaves out an entry it refuses (not sealed by the cluster's
	// secret, or malformed), which leaves a gap.
	Entries []HistoryEntry
	// Through is the last offset the read covered: every event kept with an offset after
	// the one asked for and up to Through is in Entries, so the offsets of that range
	// missing from Entries are gone. It is Latest.Offset unless the read's limit cut it
	// short. History.Read implementations need not set it; the cluster's State does.
	Through uint64
}

// History keeps the recent events of a cluster's history channels and gives each its
// Position. broker/memory, broker/redis and broker/nats implement it beside their Broker, and
// every implementation passes broker/historytest. A single node keeps its history itself
// (cluster.Local) and needs none.
//
// All methods are safe for concurrent use.
type History interface {
	// Publish gives msg, a BusEvent of a channel under rule, the next offset of
	// (msg.App, msg.Channel), keeps msg.Payload as that offset's entry within the rule's
	// Size and TTL, and publishes msg on the bus with its position (msg.Epoch, msg.Offset)
	// as the engine's Broker.Publish would. It returns the position given. Offsets are
	// given without gaps; the bus may still lose or reorder the message, which receivers
	// repair with Read. Errors are those of Broker.Publish; an error may leave the offset
	// given and the entry kept without the message published.
	//
	// A message with a Key is kept at most once per (App, Channel, Key) within the engine's
	// key window (DefaultKeyWindow unless configured), whichever node publishes it: a repeat
	// keeps nothing and returns the position of the one kept, with a nil error. Whether a
	// repeat publishes the kept message on the bus again is the engine's (receivers drop an
	// offset they have). The check and the keeping are one step, so that of concurrent
	// repeats exactly one is kept.
	Publish(ctx context.Context, rule HistoryRule, msg BusMessage) (Position, error)

	// Read returns the retained events of (app, channel) with offsets after `after`, at
	// most limit of them (oldest first), and the channel's latest position. Events older
	// than rule.TTL are not returned.
	Read(ctx context.Context, rule HistoryRule, app, channel string, after uint64, limit int) (HistoryPage, error)
}
