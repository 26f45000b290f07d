package pusher

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/jsonscan"
)

// DecodePresenceData parses the channel_data of a presence subscription:
// {"user_id": string|number, "user_info": any}. A numeric user_id (common in the wild, as in
// Pusher's own docs) becomes the string JavaScript's String() would give it, so that the ids the
// server sends back match the keys pusher-js looks members up by. A missing, empty, null or
// non-scalar user_id is an error. Info is user_info's raw JSON, nil when absent or null.
func DecodePresenceData(channelData string) (herald.Member, error) {
	obj, err := openJSONObject(channelData, "channel_data")
	if err != nil {
		return herald.Member{}, err
	}
	var m herald.Member
	var id []byte
	for {
		key, val, ok := obj.next()
		if !ok {
			break
		}
		switch string(key) {
		case "user_id":
			id = val
		case "user_info":
			m.Info = rawOrNil(val)
		}
	}
	if id == nil || isNull(id) {
		return herald.Member{}, invalid("channel_data has no user_id")
	}
	switch id[0] {
	case '"':
		m.UserID = jsonscan.Unquote(id)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var ok bool
		if m.UserID, ok = numberString(string(id)); !ok {
			return herald.Member{}, invalid("channel_data user_id %s is out of range", id)
		}
	default:
		return herald.Member{}, invalid("channel_data user_id must be a string or a number")
	}
	if m.UserID == "" {
		return herald.Member{}, invalid("channel_data user_id is empty")
	}
	return m, nil
}

// MaxWatchlist is the most user ids a watchlist may hold, as on Pusher.
const MaxWatchlist = 100

// UserData is the user_data of a signin: ID is the user's id, Info its raw "user_info" (nil
// when absent or null) and Watchlist the optional ids whose online state the user follows.
type UserData struct {
	ID        string
	Info      json.RawMessage
	Watchlist []string
}

// DecodeUserData parses the user_data of a signin. It must be a JSON object with a non-empty
// string "id" (pusher-js drops a signin whose id is not a string); "watchlist", when present
// and not null, must be an array of at most MaxWatchlist strings.
func DecodeUserData(s string) (UserData, error) {
	obj, err := openJSONObject(s, "user_data")
	if err != nil {
		return UserData{}, err
	}
	var u UserData
	for {
		key, val, ok := obj.next()
		if !ok {
			break
		}
		switch string(key) {
		case "id":
			if u.ID, err = stringField(val, "user_data id"); err != nil {
				return UserData{}, err
			}
		case "user_info":
			u.Info = rawOrNil(val)
		case "watchlist":
			u.Watchlist = nil
			if !isNull(val) {
				if err := json.Unmarshal(val, &u.Watchlist); err != nil {
					return UserData{}, invalid("user_data watchlist must be an array of strings")
				}
				if n := len(u.Watchlist); n > MaxWatchlist {
					return UserData{}, invalid("user_data watchlist has %d user ids, at most %d", n, MaxWatchlist)
				}
			}
		}
	}
	if u.ID == "" {
		return UserData{}, invalid("user_data has no id")
	}
	return u, nil
}

// openJSONObject returns a walker over the JSON object held in s; what names s in errors.
func openJSONObject(s, what string) (members, error) {
	if s == "" {
		return members{}, invalid("%s is missing", what)
	}
	b := []byte(s)
	if !json.Valid(b) {
		return members{}, invalid("%s is not valid JSON", what)
	}
	obj, ok := openObject(b)
	if !ok {
		return members{}, invalid("%s must be a JSON object", what)
	}
	return obj, nil
}

// rawOrNil returns a copy of a raw JSON value, or nil for null.
func rawOrNil(val []byte) json.RawMessage {
	if isNull(val) {
		return nil
	}
	return bytes.Clone(val)
}

// numberString formats a JSON number literal as JavaScript's String(Number(lit)) would, for the
// numbers where Go can do so exactly: integer literals are kept as written (String() would
// round those past 2^53, which helps nobody), others are formatted in plain decimal. Numbers
// JavaScript would print in exponent form (|x| >= 1e21 or < 1e-6) are refused.
func numberString(lit string) (string, bool) {
	integer := true
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			integer = false
			break
		}
	}
	if integer {
		if lit == "-0" {
			return "0", true
		}
		return lit, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return "", false
	}
	if f == 0 {
		return "0", true
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		return "", false
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}
