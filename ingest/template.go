package ingest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Template renders a string from a record: literal text with variables in braces.
//
//	{topic}        the topic, stream or pub/sub channel the record came from
//	{partition}    its Kafka partition (0 for Redis)
//	{key}          its key
//	{header.NAME}  the header (Redis: the entry field) named NAME
//	{value}        the whole value, as it is
//	{value.PATH}   the field at PATH of the value parsed as JSON: object keys and array
//	               indexes joined by dots ("value.trade.price", "value.items.0.id"); a string
//	               renders as its text, any other JSON value as its JSON text
//
// "{{" and "}}" stand for literal braces. A variable that is absent (a missing header or
// field, a JSON null) makes the record a bad record (ReasonMissingField).
type Template struct {
	src   string
	parts []part
}

type varKind uint8

const (
	literal varKind = iota
	varTopic
	varPartition
	varKey
	varHeader
	varValue
	varValuePath
)

type part struct {
	kind varKind
	text string   // the literal, or the header name
	path []string // value path
}

// ParseTemplate compiles s. Its errors say what is wrong and where, without s itself (the
// caller names the field).
func ParseTemplate(s string) (*Template, error) {
	t := &Template{src: s}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{kind: literal, text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return nil, fmt.Errorf("'}' at byte %d closes nothing (write }} for a literal brace)", i)
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("'{' at byte %d is never closed (write {{ for a literal brace)", i)
			}
			p, err := parseVar(s[i+1 : i+end])
			if err != nil {
				return nil, err
			}
			flush()
			t.parts = append(t.parts, p)
			i += end
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

func parseVar(v string) (part, error) {
	switch v {
	case "topic":
		return part{kind: varTopic}, nil
	case "partition":
		return part{kind: varPartition}, nil
	case "key":
		return part{kind: varKey}, nil
	case "value":
		return part{kind: varValue}, nil
	}
	if name, ok := strings.CutPrefix(v, "header."); ok && name != "" {
		return part{kind: varHeader, text: name}, nil
	}
	if path, ok := strings.CutPrefix(v, "value."); ok {
		segs := strings.Split(path, ".")
		for _, s := range segs {
			if s == "" {
				return part{}, fmt.Errorf("{%s}: empty part in the value path", v)
			}
		}
		return part{kind: varValuePath, path: segs}, nil
	}
	return part{}, fmt.Errorf("unknown variable {%s}: want {topic}, {partition}, {key}, {header.NAME}, {value} or {value.PATH}", v)
}

// String returns the template as written.
func (t *Template) String() string { return t.src }

// Literal reports whether the template has no variable, and its text.
func (t *Template) Literal() (string, bool) {
	switch {
	case len(t.parts) == 0:
		return "", true
	case len(t.parts) == 1 && t.parts[0].kind == literal:
		return t.parts[0].text, true
	}
	return "", false
}

// errMissing is a variable that the record does not have.
type errMissing struct{ what string }

func (e errMissing) Error() string { return e.what + " is missing" }

// render writes the template for r; v holds r's parsed value, shared by the templates of one
// record.
func (t *Template) render(r *Record, v *value) (string, error) {
	if len(t.parts) == 1 { // the usual case: no builder
		return t.parts[0].render(r, v)
	}
	var b strings.Builder
	for _, p := range t.parts {
		s, err := p.render(r, v)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func (p part) render(r *Record, v *value) (string, error) {
	switch p.kind {
	case literal:
		return p.text, nil
	case varTopic:
		return r.Topic, nil
	case varPartition:
		return strconv.Itoa(int(r.Partition)), nil
	case varKey:
		if r.Key == nil {
			return "", errMissing{"{key}"}
		}
		return string(r.Key), nil
	case varHeader:
		h, ok := r.header(p.text)
		if !ok {
			return "", errMissing{"{header." + p.text + "}"}
		}
		return string(h), nil
	case varValue:
		return string(r.Value), nil
	case varValuePath:
		return v.lookup(r.Value, p.path)
	}
	return "", errors.New("unknown template part")
}
