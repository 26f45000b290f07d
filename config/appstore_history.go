package config

import (
	"fmt"
	"maps"
	"strings"

	"github.com/herald-rt/herald"
)

// StoreHistory is one of app_store.history: a history rule for the apps of the app store
// whose ids match Apps, after each app's own rules (its history column).
type StoreHistory struct {
	Apps     string   // glob over app ids: '*' matches any run of characters
	Channels string   // glob over channel names
	Size     int      // events kept per channel
	TTL      Duration // how long each event is kept
}

// The environment variable and the flag of app_store.history: the whole list, in YAML's
// flow style or JSON, replacing the file's.
const (
	storeHistoryKey  = "app_store.history"
	storeHistoryEnv  = "HERALD_APP_STORE_HISTORY"
	storeHistoryFlag = "app-store-history"
)

// decodeStoreHistory reads app_store.history from v, the file's value or the parsed text of
// the environment variable or the flag (src), replacing what an earlier layer set.
func (l *loader) decodeStoreHistory(v fileValue, src string) {
	for p := range maps.Keys(l.from) {
		if strings.HasPrefix(p, storeHistoryKey+"[") {
			delete(l.from, p)
			delete(l.failed, p)
		}
	}
	items, err := v.items()
	if err != nil {
		l.fail(storeHistoryKey, src, err)
		return
	}
	l.read(storeHistoryKey, src)
	rules := make([]StoreHistory, len(items))
	for j, item := range items {
		h := &rules[j]
		at := fmt.Sprintf("%s[%d]", storeHistoryKey, j)
		l.table(item, at, src, l.scalars(at, src, map[string]any{"apps": &h.Apps, "channels": &h.Channels, "size": &h.Size, "ttl": &h.TTL}))
	}
	l.cfg.AppStore.History = rules
}

// storeHistoryText reads app_store.history from the environment variable's or the flag's
// text: a list such as [{apps: "*", channels: "auction-*", size: 1000, ttl: 10m}] (or the
// same in JSON); empty (a flag's) is no rule.
func (l *loader) storeHistoryText(text, src string) {
	if strings.TrimSpace(text) == "" {
		text = "[]"
	}
	v, err := parseYAML([]byte(text))
	if err != nil {
		l.fail(storeHistoryKey, src, fmt.Errorf("want a list such as [{apps: \"*\", channels: \"auction-*\", size: 1000, ttl: 10m}]: %v", err))
		return
	}
	l.decodeStoreHistory(v, src)
}

// storeHistory checks app_store.history: each rule as an app's own are checked, and apps
// globs; only with an app store (the file's apps have apps[].history).
func (l *loader) storeHistory(c *Config) {
	for i, r := range c.AppStore.HistoryRules() {
		l.historyRule(fmt.Sprintf("%s[%d]", storeHistoryKey, i), r.Check())
	}
	if len(c.AppStore.History) > 0 && !c.AppStore.On() {
		l.problem(storeHistoryKey, "applies to the apps of an app store (app_store.postgres.url or app_store.mysql.dsn): give the file's apps their rules in apps[].history")
	}
}

// historyRules converts app_store.history.
func (c AppStoreConfig) HistoryRules() []herald.AppsHistoryRule {
	var out []herald.AppsHistoryRule
	for _, h := range c.History {
		out = append(out, herald.AppsHistoryRule{Apps: h.Apps, HistoryRule: herald.HistoryRule{Channels: h.Channels, Size: h.Size, TTL: h.TTL.Duration}})
	}
	return out
}
