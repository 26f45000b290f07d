package pusher

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func appendEscapedPlain(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscapedASCII(dst, c, false)
			i++
			start = i
			continue
		}
		i++
	}
	return append(dst, s[start:]...)
}

func BenchmarkScratchPlain(b *testing.B) {
	s := strings.Repeat("abcdefghij", 10)
	buf := make([]byte, 0, 1024)
	for b.Loop() {
		buf = appendEscapedPlain(buf[:0], s)
	}
}
func BenchmarkScratchGeneric(b *testing.B) {
	s := strings.Repeat("abcdefghij", 10)
	buf := make([]byte, 0, 1024)
	for b.Loop() {
		buf = appendEscaped(buf[:0], s, false)
	}
}
