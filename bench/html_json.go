package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// jsonValue is a JSON document that keeps its members in order, so the HTML summary shows a
// report's fields in the order its struct declares them.
type jsonValue struct {
	kind byte   // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	text string // a scalar's text: the string, the number's literal, "true" or "false"
	keys []string
	vals []*jsonValue // an object's members (beside keys) or an array's elements
}

// parseJSON reads one JSON document.
func parseJSON(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSON(dec)
	if err != nil {
		return nil, fmt.Errorf("read report JSON: %w", err)
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		v := &jsonValue{kind: 'a'}
		if t == '{' {
			v.kind = 'o'
		}
		for dec.More() {
			if v.kind == 'o' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k.(string))
			}
			e, err := decodeJSON(dec)
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, e)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return v, nil
	case string:
		return &jsonValue{kind: 's', text: t}, nil
	case json.Number:
		return &jsonValue{kind: 'n', text: t.String()}, nil
	case bool:
		return &jsonValue{kind: 'b', text: strconv.FormatBool(t)}, nil
	default:
		return &jsonValue{kind: 'z'}, nil
	}
}

// member returns an object's member, or nil.
func (v *jsonValue) member(key string) *jsonValue {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

func (v *jsonValue) scalar() bool { return v.kind != 'o' && v.kind != 'a' }

// objects reports whether v is a non-empty array of objects: a table with a row per element.
func (v *jsonValue) objects() bool {
	if v.kind != 'a' || len(v.vals) == 0 {
		return false
	}
	for _, e := range v.vals {
		if e.kind != 'o' {
			return false
		}
	}
	return true
}

// compactJSON writes v back as compact JSON, for values nested too deep for a table.
func compactJSON(v *jsonValue) string {
	var b strings.Builder
	writeJSON(&b, v)
	return b.String()
}

func writeJSON(w io.StringWriter, v *jsonValue) {
	switch v.kind {
	case 'o', 'a':
		open, close := "[", "]"
		if v.kind == 'o' {
			open, close = "{", "}"
		}
		w.WriteString(open)
		for i, e := range v.vals {
			if i > 0 {
				w.WriteString(",")
			}
			if v.kind == 'o' {
				k, _ := json.Marshal(v.keys[i])
				w.WriteString(string(k) + ":")
			}
			writeJSON(w, e)
		}
		w.WriteString(close)
	case 's':
		s, _ := json.Marshal(v.text)
		w.WriteString(string(s))
	case 'z':
		w.WriteString("null")
	default:
		w.WriteString(v.text)
	}
}
