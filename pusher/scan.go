package pusher

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
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
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return members{}, false
	}
	return members{b: b, i: i + 1}, true
}

// next returns the next member's decoded key and raw value, or false after the last one.
func (m *members) next() (key, val []byte, ok bool) {
	b := m.b
	i := skipSpace(b, m.i)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return nil, nil, false
	}
	end := stringEnd(b, i)
	key = b[i+1 : end-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		key = []byte(unquote(b[i:end]))
	}
	i = skipSpace(b, end)
	if i < len(b) && b[i] == ':' {
		i = skipSpace(b, i+1)
	}
	vend := valueEnd(b, i)
	m.i = vend
	return key, b[i:vend], true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string literal starting at b[i] == '"'.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// unquote decodes a valid JSON string literal. Invalid UTF-8 becomes U+FFFD, as encoding/json does.
func unquote(lit []byte) string {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return string(inner) // unreachable for a literal that passed json.Valid
	}
	return s
}

func isNull(val []byte) bool { return string(val) == "null" }
