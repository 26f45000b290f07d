package ingest

import (
	"errors"
	"strings"
	"testing"
)

func TestTemplateRender(t *testing.T) {
	r := &Record{Topic: "trades", Partition: 3, Key: []byte("k1"),
		Headers: []Header{{Key: "region", Value: []byte("eu")}},
		Value:   []byte(`{"symbol":"BTC","px":101.5,"ok":true,"nested":{"a":{"b":"deep"}},"items":[{"id":7}],"nil":null}`)}
	cases := map[string]string{
		"{value.symbol}.trade":         "BTC.trade",
		"{topic}-{partition}-{key}":    "trades-3-k1",
		"{header.region}":              "eu",
		"{value.px}|{value.ok}":        "101.5|true",
		"{value.nested.a.b}":           "deep",
		"{value.nested.a}":             `{"b":"deep"}`,
		"{value.items.0.id}":           "7",
		"literal":                      "literal",
		"{{x}}":                        "{x}",
		"":                             "",
		"{value}":                      string(r.Value),
		"pre-{value.symbol}-{topic}-x": "pre-BTC-trades-x",
	}
	for src, want := range cases {
		tp, err := ParseTemplate(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		var v value
		got, err := tp.render(r, &v)
		if err != nil || got != want {
			t.Errorf("%q rendered %q, %v; want %q", src, got, err, want)
		}
	}
}

func TestTemplateMissing(t *testing.T) {
	r := &Record{Value: []byte(`{"a":null,"b":[1]}`)}
	for _, src := range []string{"{value.a}", "{value.zz}", "{value.b.5}", "{value.b.x}", "{header.h}", "{key}"} {
		tp, _ := ParseTemplate(src)
		var v value
		_, err := tp.render(r, &v)
		var m errMissing
		if !errors.As(err, &m) {
			t.Errorf("%q: err %v, want missing", src, err)
		}
	}
	tp, _ := ParseTemplate("{value.a}")
	var v value
	_, err := tp.render(&Record{Value: []byte("{not json")}, &v)
	var j errJSON
	if !errors.As(err, &j) {
		t.Errorf("invalid JSON: err %v", err)
	}
	// Valid JSON that is no object has no fields.
	v = value{}
	if _, err := tp.render(&Record{Value: []byte("42")}, &v); !errors.As(err, &errMissing{}) {
		t.Errorf("number value: err %v, want missing", err)
	}
}

func TestTemplateParseErrors(t *testing.T) {
	for src, want := range map[string]string{
		"{value.symbol":   "never closed",
		"a}b":             "closes nothing",
		"{offset}":        "unknown variable {offset}",
		"{value..x}":      "empty part",
		"{header.}":       "unknown variable",
		"{}":              "unknown variable {}",
		"{value.a}.{top}": "unknown variable {top}",
	} {
		_, err := ParseTemplate(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", src, err, want)
		}
	}
}
