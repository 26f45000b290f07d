package ingest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// refLookup is lookup as encoding/json sees it: each level decoded into a map or a slice.
func refLookup(raw []byte, path []string) (string, bool, bool) {
	var any json.RawMessage
	if json.Unmarshal(raw, &any) != nil {
		return "", false, false
	}
	cur := json.RawMessage(bytes.TrimSpace(raw))
	for _, seg := range path {
		switch {
		case len(cur) > 0 && cur[0] == '{':
			var m map[string]json.RawMessage
			_ = json.Unmarshal(cur, &m)
			next, ok := m[seg]
			if !ok {
				return "", true, false
			}
			cur = next
		case len(cur) > 0 && cur[0] == '[':
			var a []json.RawMessage
			_ = json.Unmarshal(cur, &a)
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(a) {
				return "", true, false
			}
			cur = a[n]
		default:
			return "", true, false
		}
	}
	if isNull(cur) {
		return "", true, false
	}
	if cur[0] == '"' {
		var s string
		_ = json.Unmarshal(cur, &s)
		return s, true, true
	}
	return string(cur), true, true
}

// FuzzValueLookup: the in-place scanner finds what encoding/json finds, for any input and path.
func FuzzValueLookup(f *testing.F) {
	for _, s := range []string{
		`{"ch":"BTC.trade","seq":1,"px":101.25}`, `{"a":{"b":[1,{"c":"d\"e"}]}}`, ` { "a" : [ 1 , 2 ] } `,
		`{"a":1,"a":2}`, `{"k\u0065y":"v"}`, `[{"x":null}]`, `"str"`, `12`, `{"a":"}]"}`, `{bad`,
	} {
		f.Add([]byte(s), "a.b.1.c")
		f.Add([]byte(s), "ch")
	}
	f.Fuzz(func(t *testing.T, raw []byte, p string) {
		path := strings.Split(p, ".")
		var v value
		got, err := v.lookup(raw, path)
		want, valid, found := refLookup(raw, path)
		switch {
		case !valid:
			if _, ok := err.(errJSON); !ok {
				t.Fatalf("%q %q: invalid JSON, got %q, %v", raw, p, got, err)
			}
		case !found:
			if _, ok := err.(errMissing); !ok {
				t.Fatalf("%q %q: missing, got %q, %v", raw, p, got, err)
			}
		case err != nil || got != want:
			t.Fatalf("%q %q: got %q, %v; want %q", raw, p, got, err, want)
		}
	})
}
