package pusher

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/jsonscan"
)

// Message is a decoded client->server frame. Data is the raw JSON value of "data" (object or
// string, may be nil); it is a copy, so a Message never aliases the buffer it was decoded from.
type Message struct {
	Event   string
	Channel string
	Data    json.RawMessage
}

// DataString is the message's data as a channel event carries it to other clients: the value
// of a JSON string, the JSON text of anything else, "" when there is none.
func (m Message) DataString() string {
	if len(m.Data) > 0 && m.Data[0] == '"' {
		return jsonscan.Unquote(m.Data)
	}
	return string(m.Data)
}

// Decode parses one client text message: a JSON object with a non-empty string "event", an
// optional string "channel" and any "data" (null counts as absent). Errors are *herald.Error
// with herald.CodeInvalid.
func Decode(b []byte) (Message, error) {
	if tooDeep(b, MaxDepth) {
		return Message{}, invalid("message nests deeper than %d levels", MaxDepth)
	}
	if !json.Valid(b) {
		return Message{}, invalid("message is not valid JSON")
	}
	obj, ok := openObject(b)
	if !ok {
		return Message{}, invalid("message must be a JSON object")
	}
	var event, channel, data []byte
	for {
		key, val, ok := obj.next()
		if !ok {
			break
		}
		switch string(key) {
		case "event":
			event = val
		case "channel":
			channel = val
		case "data":
			data = val
		}
	}
	var m Message
	switch {
	case event == nil:
		return Message{}, invalid("message has no event")
	case event[0] != '"':
		return Message{}, invalid("event must be a string")
	}
	if m.Event = jsonscan.Unquote(event); m.Event == "" {
		return Message{}, invalid("event must not be empty")
	}
	if channel != nil && !isNull(channel) {
		if channel[0] != '"' {
			return Message{}, invalid("channel must be a string")
		}
		m.Channel = jsonscan.Unquote(channel)
	}
	if data != nil && !isNull(data) {
		m.Data = bytes.Clone(data)
	}
	return m, nil
}

// Subscribe is the data of pusher:subscribe (and of pusher:unsubscribe, which has only Channel).
type Subscribe struct {
	Channel     string
	Auth        string
	ChannelData string
	// Recover, when the client asks to recover a history channel, is the position of the
	// last event of the channel it handled; RecoverErr, when its "recover" is malformed,
	// says how (the subscription is refused, its channel named).
	Recover    *herald.Position
	RecoverErr error
}

// DecodeSubscribe parses the data of pusher:subscribe or pusher:unsubscribe: an object, or a
// JSON string holding one (some clients double-encode), with a non-empty string "channel" and
// optional string "auth" and "channel_data".
// MaxDepth is how deeply a client message may nest arrays and objects. Checking it first, in
// one pass without allocating, spares encoding/json's validator the stack it would build for
// a message of nothing but brackets.
const MaxDepth = 64

// tooDeep reports whether b opens more than max arrays or objects at once, outside strings.
func tooDeep(b []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

func DecodeSubscribe(data json.RawMessage) (Subscribe, error) {
	obj, err := openData(data, "subscription")
	if err != nil {
		return Subscribe{}, err
	}
	var s Subscribe
	for {
		key, val, ok := obj.next()
		if !ok {
			break
		}
		switch string(key) {
		case "channel":
			s.Channel, err = stringField(val, "channel")
		case "auth":
			s.Auth, err = stringField(val, "auth")
		case "channel_data":
			s.ChannelData, err = stringField(val, "channel_data")
		case "recover":
			s.Recover, s.RecoverErr = decodeRecover(val)
		}
		if err != nil {
			return Subscribe{}, err
		}
	}
	if s.Channel == "" {
		return Subscribe{}, invalid("subscription has no channel")
	}
	return s, nil
}

// MaxEpochBytes bounds the epoch of a recovery request.
const MaxEpochBytes = 64

// maxOffset is the largest offset a recovery request may carry: the largest integer a
// JavaScript number holds exactly.
const maxOffset = 1 << 53

// decodeRecover parses the "recover" member of pusher:subscribe: an object with a string
// "epoch" (at most MaxEpochBytes; empty for a position taken before the channel had a
// history, with offset 0) and an integer "offset" from 0 to 2^53.
func decodeRecover(val []byte) (*herald.Position, error) {
	if isNull(val) {
		return nil, nil
	}
	obj, ok := openObject(val)
	if !ok {
		return nil, invalid("recover must be an object with an epoch and an offset")
	}
	var p herald.Position
	var epoch, offset bool
	for {
		key, v, more := obj.next()
		if !more {
			break
		}
		switch string(key) {
		case "epoch":
			if v[0] != '"' {
				return nil, invalid("recover.epoch must be a string")
			}
			if p.Epoch = jsonscan.Unquote(v); len(p.Epoch) > MaxEpochBytes {
				return nil, invalid("recover.epoch is longer than %d bytes", MaxEpochBytes)
			}
			epoch = true
		case "offset":
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil || n > maxOffset {
				return nil, invalid("recover.offset must be an integer from 0 to 2^53")
			}
			p.Offset, offset = n, true
		}
	}
	switch {
	case !epoch || !offset:
		return nil, invalid("recover must have an epoch and an offset")
	case p.Epoch == "" && p.Offset != 0:
		return nil, invalid("recover.offset must be 0 when recover.epoch is empty")
	}
	return &p, nil
}

// Signin is the data of pusher:signin.
type Signin struct {
	Auth     string
	UserData string
}

// DecodeSignin parses the data of pusher:signin: an object (or a JSON string holding one) with
// non-empty strings "auth" and "user_data".
func DecodeSignin(data json.RawMessage) (Signin, error) {
	obj, err := openData(data, "signin")
	if err != nil {
		return Signin{}, err
	}
	var s Signin
	for {
		key, val, ok := obj.next()
		if !ok {
			break
		}
		switch string(key) {
		case "auth":
			s.Auth, err = stringField(val, "auth")
		case "user_data":
			s.UserData, err = stringField(val, "user_data")
		}
		if err != nil {
			return Signin{}, err
		}
	}
	switch {
	case s.Auth == "":
		return Signin{}, invalid("signin has no auth")
	case s.UserData == "":
		return Signin{}, invalid("signin has no user_data")
	}
	return s, nil
}

// openData returns a walker over the object in data, unwrapping one level of string encoding.
func openData(data []byte, what string) (members, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || isNull(data) {
		return members{}, invalid("%s has no data", what)
	}
	if !json.Valid(data) {
		return members{}, invalid("%s data is not valid JSON", what)
	}
	if data[0] == '"' {
		data = []byte(jsonscan.Unquote(data))
		if !json.Valid(data) {
			return members{}, invalid("%s data is a string that does not hold valid JSON", what)
		}
	}
	obj, ok := openObject(data)
	if !ok {
		return members{}, invalid("%s data must be a JSON object", what)
	}
	return obj, nil
}

// stringField decodes a member that must be a string; null reads as "".
func stringField(val []byte, name string) (string, error) {
	switch {
	case isNull(val):
		return "", nil
	case val[0] != '"':
		return "", invalid("%s must be a string", name)
	}
	return jsonscan.Unquote(val), nil
}

func invalid(format string, args ...any) error {
	return herald.Errorf(herald.CodeInvalid, format, args...)
}
