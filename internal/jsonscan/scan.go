package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// SkipSpace returns the index of the first byte at or after b[i] that is not JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// StringEnd returns the index just past the string literal starting at b[i] == '"'.
func StringEnd(b []byte, i int) int {
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

// ValueEnd returns the index just past the JSON value starting at b[i].
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = StringEnd(b, j) - 1
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

// Plain reports whether the body of a JSON string (between its quotes) means itself: no
// escape, valid UTF-8 (else encoding/json undoes the escapes and replaces invalid bytes).
func Plain(s []byte) bool { return bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) }

// Unquote decodes a valid JSON string literal. Invalid UTF-8 becomes U+FFFD, as encoding/json
// does.
func Unquote(lit []byte) string {
	inner := lit[1 : len(lit)-1]
	if Plain(inner) {
		return string(inner)
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return string(inner) // unreachable for a literal that passed json.Valid
	}
	return s
}
