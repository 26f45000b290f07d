package broker

import (
	"strconv"
	"testing"
)

func TestParseSubjectInvertsSubject(t *testing.T) {
	for _, k := range []Key{{"app", "chan"}, {"", "state"}, {"a.b", "private-x:y z%"}, {"ä", "presence-€"}} {
		s := Subject("herald", k.App, k.Channel)
		got, ok := ParseSubject("herald", s)
		if !ok || got != k {
			t.Errorf("ParseSubject(%q) = %v, %v; want %v", s, got, ok, k)
		}
		if Internal("herald", s) != (k.App == "") {
			t.Errorf("Internal(%q) = %v", s, !(k.App == ""))
		}
	}
	for _, s := range []string{"other.app.chan", "herald.app", "herald.%G1.x", "herald.a.%4"} {
		if _, ok := ParseSubject("herald", s); ok {
			t.Errorf("ParseSubject(%q) accepted", s)
		}
	}
}

func TestLossesTakeOnce(t *testing.T) {
	var l Losses
	l.Add(Key{"a", "x"})
	l.Add(Key{"a", "x"})
	l.Add(Key{"b", "y"})
	got := map[Key]bool{}
	if !l.Take(func(app, ch string) { got[Key{app, ch}] = true }) || len(got) != 2 || !got[Key{"a", "x"}] || !got[Key{"b", "y"}] {
		t.Fatalf("took %v", got)
	}
	if !l.Take(func(app, ch string) { t.Errorf("taken again: %s %s", app, ch) }) {
		t.Fatal("empty Take said all")
	}
	for i := range maxLosses + 1 {
		l.Add(Key{"a", strconv.Itoa(i)})
	}
	if l.Take(func(string, string) { t.Error("f called past the bound") }) {
		t.Fatal("Take past the bound did not say all")
	}
}
