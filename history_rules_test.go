package herald_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// TestHistoryRules: an app's own rules come first, then the rules for apps whose Apps glob
// matches its id, in order; with none matching, the app's own slice itself.
func TestHistoryRules(t *testing.T) {
	own := herald.HistoryRule{Channels: "auction-*", Size: 1, TTL: time.Second}
	all := herald.AppsHistoryRule{Apps: "*", HistoryRule: herald.HistoryRule{Channels: "auction-*", Size: 10, TTL: time.Minute}}
	tenants := herald.AppsHistoryRule{Apps: "tenant-*", HistoryRule: herald.HistoryRule{Channels: "chat-*", Size: 5, TTL: time.Hour}}
	a := &herald.App{ID: "tenant-1", History: []herald.HistoryRule{own}}
	got := a.HistoryRules([]herald.AppsHistoryRule{tenants, all})
	if want := []herald.HistoryRule{own, tenants.HistoryRule, all.HistoryRule}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rules %+v, want %+v", got, want)
	}
	if r, _ := (&herald.App{History: got}).HistoryFor("auction-1"); r != own {
		t.Errorf("auction-1's rule %+v, want the app's own", r)
	}
	if got := a.HistoryRules([]herald.AppsHistoryRule{{Apps: "shop", HistoryRule: all.HistoryRule}}); &got[0] != &a.History[0] {
		t.Error("with no rule matching, not the app's own rules")
	}
	if got := (&herald.App{ID: "shop"}).HistoryRules(nil); got != nil {
		t.Errorf("no rules: %+v", got)
	}
}

// TestHistoryRuleCheck: the bounds of a rule, field by field.
func TestHistoryRuleCheck(t *testing.T) {
	for _, tc := range []struct {
		r    herald.AppsHistoryRule
		want []string
	}{
		{herald.AppsHistoryRule{Apps: "*", HistoryRule: herald.HistoryRule{Channels: "a-*", Size: 1, TTL: time.Nanosecond}}, nil},
		{herald.AppsHistoryRule{Apps: "app.1-_*", HistoryRule: herald.HistoryRule{Channels: "*", Size: herald.MaxHistorySize, TTL: herald.MaxHistoryTTL}}, nil},
		{herald.AppsHistoryRule{}, []string{"apps", "channels", "size", "ttl"}},
		{herald.AppsHistoryRule{Apps: "a/b", HistoryRule: herald.HistoryRule{Channels: "private-encrypted-x", Size: herald.MaxHistorySize + 1, TTL: herald.MaxHistoryTTL + 1}},
			[]string{"apps", "channels", "size", "ttl"}},
		{herald.AppsHistoryRule{Apps: "*", HistoryRule: herald.HistoryRule{Channels: "a b", Size: 1, TTL: -time.Second}}, []string{"channels", "ttl"}},
	} {
		var got []string
		for _, p := range tc.r.Check() {
			got = append(got, p.Field)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: problems with %v, want %v", tc.r, got, tc.want)
		}
	}
}
