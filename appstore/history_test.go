package appstore_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

// historyMapping maps a table of id, key, secret and history.
func historyMapping(t *testing.T) appstore.Mapping {
	t.Helper()
	m, err := appstore.Map("apps", []appstore.Column{{Name: "id"}, {Name: "key"}, {Name: "secret"}, {Name: "history"}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHistoryColumn: the history column reads as the file's apps[].history (ttl a Go
// duration or seconds); a rule herald cannot keep is left out with a *HistoryError naming it,
// the app served all the same; what herald writes reads back the same.
func TestHistoryColumn(t *testing.T) {
	m := historyMapping(t)
	auction := herald.HistoryRule{Channels: "auction-*", Size: 1000, TTL: 10 * time.Minute}
	for _, tc := range []struct {
		column   any
		want     []herald.HistoryRule
		problems []string // each in the *HistoryError; none: no error
	}{
		{nil, nil, nil},
		{"", nil, nil},
		{"[]", nil, nil},
		{"null", nil, nil},
		{`[{"channels":"auction-*","size":1000,"ttl":"10m"}]`, []herald.HistoryRule{auction}, nil},
		{`[{"channels":"auction-*","size":1000,"ttl":600}]`, []herald.HistoryRule{auction}, nil},
		{`[{"channels":"auction-*","size":1000,"ttl":"600"}, {"channels":"*","size":5,"ttl":"1.5"}]`,
			[]herald.HistoryRule{auction, {Channels: "*", Size: 5, TTL: 1500 * time.Millisecond}}, nil},
		{[]byte(`[{"ttl":"10m","size":1000,"channels":"auction-*"}]`), []herald.HistoryRule{auction}, nil},
		{`[{"channels":"a-*","size":0,"ttl":"1m"}, {"channels":"auction-*","size":1000,"ttl":"10m"}]`, []herald.HistoryRule{auction},
			[]string{"history[0] left out: size: 0 must be from 1 to 100000"}},
		{`[{"channels":"a-*","size":100001,"ttl":"8d"}]`, nil, []string{`history[0] left out: ttl "8d": want a duration`}},
		{`[{"channels":"a-*","size":10,"ttl":"169h"}]`, nil, []string{"history[0] left out: ttl: 169h0m0s must be more than 0 and at most 168h0m0s"}},
		{`[{"channels":"a-*","size":10,"ttl":0}]`, nil, []string{"ttl: 0s must be more than 0"}},
		{`[{"channels":"a-*","size":10}]`, nil, []string{"ttl: 0s must be more than 0"}},
		{`[{"channels":"private-encrypted-*","size":10,"ttl":"1m"}]`, nil, []string{"encrypted channels keep no history"}},
		{`[{"channels":"a b","size":10,"ttl":"1m"}]`, nil, []string{`channels: "a b" holds a character no channel name has`}},
		{`[{"size":10,"ttl":"1m"}]`, nil, []string{"channels: must name the channels"}},
		{`[{"channels":"a-*","size":10,"ttl":"1m","sise":3}]`, nil, []string{`unknown field "sise"`}},
		{`[{"channels":"a-*","size":"10","ttl":"1m"}]`, nil, []string{"history[0] left out: not a rule"}},
		{`[{"channels":"a-*","size":1.5,"ttl":"1m"}]`, nil, []string{"history[0] left out: not a rule"}},
		{`{"channels":"a-*","size":10,"ttl":"1m"}`, nil, []string{"not a JSON array of rules"}},
		{`auction-*`, nil, []string{"not a JSON array of rules"}},
	} {
		a, err := m.App([]any{"app", "key", "secret", tc.column})
		if !reflect.DeepEqual(a.History, tc.want) {
			t.Errorf("%v: rules %+v, want %+v", tc.column, a.History, tc.want)
		}
		var he *appstore.HistoryError
		switch {
		case tc.problems == nil && err != nil:
			t.Errorf("%v: %v, want no error", tc.column, err)
		case tc.problems != nil && (!errors.As(err, &he) || !appstore.Usable(err) || he.App != "app"):
			t.Errorf("%v: %v, want a usable *HistoryError of app", tc.column, err)
		case tc.problems != nil:
			for _, p := range tc.problems {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%v: %q does not say %q", tc.column, err, p)
				}
			}
		}
	}

	rules := []herald.HistoryRule{auction, {Channels: "presence-room-*", Size: 50, TTL: 90 * time.Second},
		{Channels: "*", Size: 1, TTL: time.Hour}, {Channels: "x", Size: 2, TTL: 250 * time.Millisecond}}
	vals := m.Values(&herald.App{ID: "app", Key: "key", Secret: "secret", History: rules})
	want := `[{"channels":"auction-*","size":1000,"ttl":"10m"},{"channels":"presence-room-*","size":50,"ttl":"1m30s"},` +
		`{"channels":"*","size":1,"ttl":"1h"},{"channels":"x","size":2,"ttl":"250ms"}]`
	if vals[3] != want {
		t.Errorf("written as %v, want %s", vals[3], want)
	}
	if a, err := m.App(vals); err != nil || !reflect.DeepEqual(a.History, rules) {
		t.Errorf("read back %+v, %v; want %+v", a.History, err, rules)
	}
	if vals := m.Values(&herald.App{ID: "app"}); vals[3] != nil {
		t.Errorf("no rule written as %v, want NULL", vals[3])
	}
}

// TestHistoryAndWebhooksLeftOut: a row with a bad webhook and a bad history rule is an app,
// with both problems.
func TestHistoryAndWebhooksLeftOut(t *testing.T) {
	m, err := appstore.Map("apps", []appstore.Column{{Name: "id"}, {Name: "key"}, {Name: "secret"}, {Name: "webhooks"}, {Name: "history"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.App([]any{"app", "key", "secret", `[{"url":"ftp://x"}]`, `[{"channels":"a-*","size":0,"ttl":"1m"}]`})
	var we *appstore.WebhookError
	var he *appstore.HistoryError
	if !appstore.Usable(err) || !errors.As(err, &we) || !errors.As(err, &he) || we.App != "app" || he.App != "app" || a.ID != "app" {
		t.Fatalf("app %+v, err %v; want the app with both problems", a, err)
	}
}
