package pusher

import (
	"bytes"

	"github.com/herald-rt/herald/internal/jsonscan"
)

// members walks the members of one JSON object. It matches keys exactly, as JavaScript does
// (encoding/json would also match "Event" for "event"); a repeated key is seen twice, so the
// caller's last assignment wins, as in JSON.parse. The input must have passed json.Valid.
type members struct {
	b []byte
	i int
}

// openObject returns a walker over the object in b, or false when b is not an object.
// b must be valid JSON.
func openObject(b []byte) (members, bool) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return members{}, false
	}
	return members{b: b, i: i + 1}, true
}

// next returns the next member's decoded key and raw value, or false after the last one.
func (m *members) next() (key, val []byte, ok bool) {
	b := m.b
	i := jsonscan.SkipSpace(b, m.i)
	if i < len(b) && b[i] == ',' {
		i = jsonscan.SkipSpace(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return nil, nil, false
	}
	end := jsonscan.StringEnd(b, i)
	key = b[i+1 : end-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		key = []byte(jsonscan.Unquote(b[i:end]))
	}
	i = jsonscan.SkipSpace(b, end)
	if i < len(b) && b[i] == ':' {
		i = jsonscan.SkipSpace(b, i+1)
	}
	vend := jsonscan.ValueEnd(b, i)
	m.i = vend
	return key, b[i:vend], true
}

func isNull(val []byte) bool { return string(val) == "null" }
