package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzScan: on any valid JSON value, ValueEnd ends where the value does, and Unquote of a
// string is what encoding/json decodes.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`"a\"b"`, ` {"x":[1,{"y":"}"}],"z":null} `, `[]`, `-1.5e3`, `"\u00e9\ud83d\ude00"`, "\"\xff\"", `true`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		v := bytes.TrimRight(b, " \t\r\n")
		i := SkipSpace(v, 0)
		if end := ValueEnd(v, i); end != len(v) {
			t.Fatalf("%q: ValueEnd %d, want %d", b, end, len(v))
		}
		if v[i] == '"' {
			var want string
			if err := json.Unmarshal(v[i:], &want); err != nil {
				t.Fatal(err)
			}
			if got := Unquote(v[i:]); got != want {
				t.Fatalf("%q: Unquote %q, want %q", b, got, want)
			}
		}
	})
}
