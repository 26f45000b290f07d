package pusher

import (
	"bytes"
	"encoding/json"
)

// EventBody is one event of a REST publish (the body of POST /apps/{id}/events, or one of a
// batch's) as a server SDK sends it; an ingest source in the pusher format reads each record
// as one.
type EventBody struct {
	Name     string          `json:"name"`
	Data     json.RawMessage `json:"data"`
	Channel  string          `json:"channel"`
	Channels []string        `json:"channels"`
	SocketID string          `json:"socket_id"`
}

// Targets returns the channels e names: its channel or its channels, not both (an error with
// herald.CodeInvalid). Whether they are valid is ValidateChannels'.
func (e *EventBody) Targets() ([]string, error) {
	if e.Channel == "" {
		return e.Channels, nil
	}
	if len(e.Channels) > 0 {
		return nil, invalid("give channel or channels, not both")
	}
	return []string{e.Channel}, nil
}

// EventData returns the event data as the string clients receive: Pusher's SDKs send a JSON
// string; any other JSON value is passed on as its text, and none (or null) is "". A string
// that does not decode is an error with herald.CodeInvalid.
func EventData(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid("data: %v", err)
		}
		return s, nil
	}
	return string(raw), nil
}
