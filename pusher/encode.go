package pusher

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// plainASCII marks the bytes that stand for themselves inside a JSON string: printable ASCII
// but '"' and '\\'. A 256-entry table makes the common case one lookup.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string literal, quotes included. It escapes '"', '\\',
// control characters (\n, \r and \t by name, the rest as \u00XX) and U+2028/U+2029 (which
// JavaScript source cannot hold raw), and replaces each byte of invalid UTF-8 with \ufffd, as
// encoding/json does. It allocates only to grow dst.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s, false)
	return append(dst, '"')
}

// appendInnerString appends s as a JSON string literal that is itself inside a JSON string:
// what AppendString(AppendString(nil, s)) would put between its outer quotes.
func appendInnerString(dst []byte, s string) []byte {
	dst = append(dst, `\"`...)
	dst = appendEscaped(dst, s, true)
	return append(dst, `\"`...)
}

// appendEscaped appends the escaped body of a JSON string holding s. With double set it escapes
// twice, for a string literal written inside another string literal.
func appendEscaped[T string | []byte](dst []byte, s T, double bool) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainASCII[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			dst = appendEscapedASCII(dst, c, double)
			i++
			start = i
			continue
		}
		size := runeLen(s, i)
		switch {
		case size == 0:
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, double, "ufffd")
			i++
			start = i
		case size == 3 && c == 0xE2 && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9):
			dst = append(dst, s[start:i]...)
			if s[i+2] == 0xA8 {
				dst = appendEscape(dst, double, "u2028")
			} else {
				dst = appendEscape(dst, double, "u2029")
			}
			i += 3
			start = i
		default:
			i += size
		}
	}
	return append(dst, s[start:]...)
}

// appendEscapedASCII appends the escape of a control character, '"' or '\\'.
func appendEscapedASCII(dst []byte, c byte, double bool) []byte {
	switch c {
	case '"', '\\':
		dst = append(dst, '\\')
		if double {
			dst = append(dst, '\\', '\\') // the escaping backslash, then c's own escape
		}
		return append(dst, c)
	case '\n':
		return appendEscape(dst, double, "n")
	case '\r':
		return appendEscape(dst, double, "r")
	case '\t':
		return appendEscape(dst, double, "t")
	}
	dst = appendEscape(dst, double, "u00")
	return append(dst, hexDigits[c>>4], hexDigits[c&0xF])
}

// appendEscape appends a backslash (escaped itself when double) and then seq.
func appendEscape(dst []byte, double bool, seq string) []byte {
	if double {
		dst = append(dst, '\\')
	}
	dst = append(dst, '\\')
	return append(dst, seq...)
}

// runeLen returns the length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80),
// or 0 when it is not one. It accepts exactly what utf8.DecodeRune accepts.
func runeLen[T string | []byte](s T, i int) int {
	n := len(s) - i
	c := s[i]
	cont := func(b byte) bool { return b&0xC0 == 0x80 }
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if n < 2 || !cont(s[i+1]) {
			return 0
		}
		return 2
	case c < 0xF0:
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F // no surrogates
		}
		if n < 3 || s[i+1] < lo || s[i+1] > hi || !cont(s[i+2]) {
			return 0
		}
		return 3
	case c < 0xF5:
		lo, hi := byte(0x80), byte(0xBF)
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F // nothing past U+10FFFF
		}
		if n < 4 || s[i+1] < lo || s[i+1] > hi || !cont(s[i+2]) || !cont(s[i+3]) {
			return 0
		}
		return 4
	}
	return 0
}
