package main

import (
	"fmt"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/nats"
)

// AppHistory is one history rule of an app as configured (herald.HistoryRule).
type AppHistory struct {
	Channels string   // glob over channel names: '*' matches any run of characters
	Size     int      // events kept per channel
	TTL      Duration // how long each event is kept
}

// HistoryConfig bounds what history channels keep on this node.
type HistoryConfig struct {
	MaxBytesPerApp int // each app's kept events, bytes
	// Replicas is how many servers of a NATS cluster keep each history stream (JetStream);
	// 0 = 1. NATS only.
	Replicas int
}

func (l *loader) decodeHistory(v fileValue, prefix, src string, app *AppConfig) {
	path := prefix + ".history"
	items, err := v.items()
	if err != nil {
		l.fail(path, src, err)
		return
	}
	l.read(path, src)
	app.History = make([]AppHistory, len(items))
	for j, item := range items {
		h := &app.History[j]
		at := fmt.Sprintf("%s[%d]", path, j)
		l.table(item, at, src, l.scalars(at, src, map[string]any{"channels": &h.Channels, "size": &h.Size, "ttl": &h.TTL}))
	}
}

// history checks history.* and every app's history rules.
func (l *loader) history(c *Config) {
	l.atLeast("history.max_bytes_per_app", c.History.MaxBytesPerApp, 64<<10)
	if r := c.History.Replicas; r < 0 || r > nats.MaxHistoryReplicas {
		l.problem("history.replicas", "%d must be from 0 (one) to %d", r, nats.MaxHistoryReplicas)
	} else if u, err := parseBusURL(c.Cluster.URL); r > 0 && (c.Cluster.URL == "" || err == nil && u.engine != "nats") {
		l.problem("history.replicas", "applies to a NATS cluster bus (JetStream streams) only; cluster.url is not one")
	}
	for i, a := range c.Apps {
		for j, r := range a.historyRules() {
			l.historyRule(fmt.Sprintf("apps[%d].history[%d]", i, j), r.Check())
		}
	}
}

// historyRule reports the problems of the history rule at path, each under its field.
func (l *loader) historyRule(path string, problems []herald.RuleProblem) {
	for _, p := range problems {
		l.problem(path+"."+p.Field, "%s", p.Problem)
	}
}

// historyRules converts an app's configured rules.
func (a AppConfig) historyRules() []herald.HistoryRule {
	var out []herald.HistoryRule
	for _, h := range a.History {
		out = append(out, herald.HistoryRule{Channels: h.Channels, Size: h.Size, TTL: h.TTL.Duration})
	}
	return out
}
