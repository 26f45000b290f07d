package pusher

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// tricky strings for the encoders: quotes, escapes, controls, unicode, invalid UTF-8.
var tricky = []string{
	"",
	"plain",
	`"quoted"`,
	`back\slash`,
	`{"a":"b\"c"}`,
	"line\nfeed\r\ttab",
	"\x00\x01\x08\x0b\x0c\x1f\x7f",
	"</script>&<>",
	"caf\u00e9 \u65e5\u672c \U0001F600",
	"\u2028line\u2029para",
	"\ufffd already replaced",
	"bad\xffbyte",
	"\xc3",             // truncated 2-byte sequence
	"\xe2\x80",         // truncated U+2028
	"\xed\xa0\x80",     // surrogate
	"\xf4\x90\x80\x80", // past U+10FFFF
	"\xc0\xaf",         // overlong
	"\xf0\x9f\x98",     // truncated emoji
	"end with backslash\\",
	strings.Repeat("long ", 100) + "\u00e9\n",
}

// sanitized is what encoding/json decodes a string with invalid UTF-8 to: each bad byte U+FFFD.
func sanitized(s string) string { return string([]rune(s)) }

func TestAppendStringDecodes(t *testing.T) {
	for _, s := range tricky {
		b := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("AppendString(%q) = %s: %v", s, b, err)
			continue
		}
		if got != sanitized(s) {
			t.Errorf("AppendString(%q) decodes to %q", s, got)
		}
		if !utf8.Valid(b) {
			t.Errorf("AppendString(%q) = %q is not UTF-8", s, b)
		}
	}
}

func TestAppendStringExact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\n\r\t\x00\x1f\x08\x0c", `"\n\r\t\u0000\u001f\u0008\u000c"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"x\xffy", `"x\ufffdy"`},
		{"\u00e9\x7f<", "\"\u00e9\x7f<\""},
	}
	for _, tt := range tests {
		if got := string(AppendString([]byte("prefix:"), tt.in)); got != "prefix:"+tt.want {
			t.Errorf("AppendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestAppendInnerString(t *testing.T) {
	for _, s := range tricky {
		// The inner literal, inside an outer string, must read back as the literal of s.
		outer := append([]byte{'"'}, appendInnerString(nil, s)...)
		outer = append(outer, '"')
		var lit string
		if err := json.Unmarshal(outer, &lit); err != nil {
			t.Errorf("inner(%q): outer %s: %v", s, outer, err)
			continue
		}
		if want := string(AppendString(nil, s)); lit != want {
			t.Errorf("inner(%q) holds %s, want %s", s, lit, want)
		}
	}
}

func TestRuneLenMatchesUTF8(t *testing.T) {
	var buf [4]byte
	for b0 := 0x80; b0 < 0x100; b0++ {
		for b1 := 0; b1 < 0x100; b1++ {
			for _, tail := range [][]byte{nil, {0x80}, {0xBF, 0x80}, {0x7F}, {0x80, 0xC0}} {
				s := append(append(buf[:0], byte(b0), byte(b1)), tail...)
				r, size := utf8.DecodeRune(s)
				want := size
				if r == utf8.RuneError && size == 1 {
					want = 0
				}
				if got := runeLen(s, 0); got != want {
					t.Fatalf("runeLen(% x) = %d, want %d", s, got, want)
				}
				if got := runeLen(string(s), 0); got != want {
					t.Fatalf("runeLen(string % x) = %d, want %d", s, got, want)
				}
			}
		}
	}
}

func TestAppendStringAllocs(t *testing.T) {
	buf := make([]byte, 0, 4096)
	s := strings.Join(tricky, "|")
	if n := testing.AllocsPerRun(100, func() { buf = AppendString(buf[:0], s) }); n != 0 {
		t.Errorf("AppendString allocates %v times into a big enough buffer", n)
	}
}

// FuzzAppendString checks that AppendString (and its doubly escaped form) always makes valid
// JSON that decodes to s with invalid UTF-8 replaced, byte by byte, by U+FFFD.
func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, b, err)
		}
		if got != sanitized(s) {
			t.Fatalf("AppendString(%q) decodes to %q", s, got)
		}
		if !utf8.Valid(b) || strings.ContainsAny(string(b), "\u2028\u2029") {
			t.Fatalf("AppendString(%q) = %q holds invalid UTF-8 or a raw U+2028/9", s, b)
		}
		outer := append([]byte{'"'}, appendInnerString(nil, s)...)
		outer = append(outer, '"')
		var lit string
		if err := json.Unmarshal(outer, &lit); err != nil || lit != string(b) {
			t.Fatalf("inner(%q) = %s, holds %q, %v", s, outer, lit, err)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	for _, bc := range []struct{ name, s string }{
		{"ascii-100", strings.Repeat("abcdefghij", 10)},
		{"json-100", strings.Repeat(`{"k":"v"},`, 10)},
		{"unicode-100", strings.Repeat("caf\u00e9\u65e5\u672c", 10)},
	} {
		buf := make([]byte, 0, 1024)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.s)))
			for b.Loop() {
				buf = AppendString(buf[:0], bc.s)
			}
		})
	}
}
