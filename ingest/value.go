package ingest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// value is a record's value parsed as JSON, lazily: the top-level object is decoded once per
// record, deeper levels only along the paths asked for.
type value struct {
	top    map[string]json.RawMessage
	parsed bool
	err    error
}

// errJSON is a value that is not the JSON a template needs.
type errJSON struct{ err error }

func (e errJSON) Error() string { return "value is not JSON: " + e.err.Error() }

// lookup returns the field at path in raw as a string: a JSON string's text, any other
// value's JSON text.
func (v *value) lookup(raw []byte, path []string) (string, error) {
	if !v.parsed {
		v.parsed = true
		if err := json.Unmarshal(raw, &v.top); err != nil {
			var any json.RawMessage
			if json.Unmarshal(raw, &any) != nil {
				v.err = errJSON{err}
			} // valid JSON that is not an object: every path is missing
		}
	}
	if v.err != nil {
		return "", v.err
	}
	cur, ok := v.top[path[0]]
	for i := 1; ok && i < len(path); i++ {
		cur, ok = child(cur, path[i])
	}
	if !ok || isNull(cur) {
		return "", errMissing{"{value." + strings.Join(path, ".") + "}"}
	}
	if cur[0] == '"' {
		var s string
		if err := json.Unmarshal(cur, &s); err != nil {
			return "", errJSON{err}
		}
		return s, nil
	}
	return string(cur), nil
}

// child returns the field key of the object raw, or the element at index key of the array raw.
func child(raw json.RawMessage, key string) (json.RawMessage, bool) {
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil, false
		}
		c, ok := m[key]
		return c, ok
	case '[':
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 {
			return nil, false
		}
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil || i >= len(a) {
			return nil, false
		}
		return a[i], true
	}
	return nil, false
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || bytes.Equal(raw, []byte("null")) }
