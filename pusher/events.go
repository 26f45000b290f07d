package pusher

import (
	"slices"

	"github.com/herald-rt/herald"
)

// Names of the events clients send that the server acts on.
const (
	EventPing        = "pusher:ping"
	EventPong        = "pusher:pong"
	EventSubscribe   = "pusher:subscribe"
	EventUnsubscribe = "pusher:unsubscribe"
	EventSignin      = "pusher:signin"

	// ClientEventPrefix starts the name of every event a client may send to other clients.
	ClientEventPrefix = "client-"
)

// DefaultActivityTimeout is the activity_timeout, in seconds, that AppendConnectionEstablished
// advertises when given zero or less: pusher-js refuses a handshake without one.
const DefaultActivityTimeout = 120

// ValidateEvent checks one event published to channels, whoever publishes it (the REST API,
// the cluster bus, an ingest source): its name (ValidateEventName), its channels
// (ValidateChannels), socketID when set (ValidSocketID) and its data (ValidateEventData),
// against lim, where a zero field means its default (herald.Limits.WithDefaults). It returns
// the channels with repeats removed, in the order they were first named.
//
// The error is a *herald.Error whose message names what is wrong: herald.CodeTooLarge when
// the data is over the limit and herald.CodeInvalid for everything else (an invalid or too
// long name included: only sizes are "too large").
func ValidateEvent(name string, channels []string, data, socketID string, lim herald.Limits) ([]string, error) {
	lim = lim.WithDefaults()
	if err := ValidateEventName(name, lim.MaxEventNameLength); err != nil {
		return nil, invalid("name: %s", herald.MessageOf(err))
	}
	channels, err := ValidateChannels(channels, lim)
	if err != nil {
		return nil, err
	}
	if socketID != "" && !ValidSocketID(socketID) {
		return nil, invalid("socket_id %q is not a socket id", socketID)
	}
	if err := ValidateEventData(data, lim.MaxEventPayloadBytes); err != nil {
		return nil, err
	}
	return channels, nil
}

// ValidateChannels checks the channels one event is published to: at least one, at most
// lim.MaxChannelsPerEvent, each a valid channel name of at most lim.MaxChannelNameLength bytes
// (zero limits: the defaults). It returns them with repeats removed, keeping the order of
// first occurrence, so an event naming a channel twice reaches its subscribers once; channels
// itself is returned when it has no repeats. The error is a *herald.Error with
// herald.CodeInvalid.
func ValidateChannels(channels []string, lim herald.Limits) ([]string, error) {
	lim = lim.WithDefaults()
	if len(channels) == 0 {
		return nil, invalid("an event needs at least one channel")
	}
	if len(channels) > lim.MaxChannelsPerEvent {
		return nil, invalid("at most %d channels per event", lim.MaxChannelsPerEvent)
	}
	for _, ch := range channels {
		if err := ValidateChannelName(ch, lim.MaxChannelNameLength); err != nil {
			return nil, invalid("channel %q: %s", ch, herald.MessageOf(err))
		}
	}
	return dedupe(channels), nil
}

// ValidateEventData checks the size of an event's data, the string clients receive: at most
// maxBytes bytes (maxBytes <= 0 means herald.DefaultLimits.MaxEventPayloadBytes). The error
// is a *herald.Error with herald.CodeTooLarge.
func ValidateEventData(data string, maxBytes int) error {
	if maxBytes <= 0 {
		maxBytes = herald.DefaultLimits.MaxEventPayloadBytes
	}
	if len(data) > maxBytes {
		return herald.Errorf(herald.CodeTooLarge, "data is %d bytes, over the limit of %d", len(data), maxBytes)
	}
	return nil
}

// dedupe drops repeated channels, keeping the order of first occurrence. At most
// MaxChannelsPerEvent names: a quadratic scan allocates nothing when there is no repeat and
// beats a map at that size.
func dedupe(chans []string) []string {
	var out []string
	for i, ch := range chans {
		if slices.Contains(chans[:i], ch) {
			if out == nil {
				out = slices.Clone(chans[:i])
			}
			continue
		}
		if out != nil {
			out = append(out, ch)
		}
	}
	if out == nil {
		return chans
	}
	return out
}
