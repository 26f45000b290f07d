package config

import (
	"fmt"
	"time"

	"github.com/herald-rt/herald"
)

// AppHistory is one history rule of an app as configured (herald.HistoryRule).
type AppHistory struct {
	Channels string   // glob over channel names: '*' matches any run of characters
	Size     int      // events kept per channel
	TTL      Duration // how long each event is kept
}

// HistoryConfig bounds what history channels keep on this node, and what replaying them to
// recovering clients may cost it.
type HistoryConfig struct {
	MaxBytesPerApp int // each app's kept events, bytes
	// Replicas is how many servers of a NATS cluster keep each history stream (JetStream);
	// 0 = 1. NATS only.
	Replicas int
	// The replay budget, in bytes per second (0: no bound), each with a burst of replayBurst seconds'
	// worth: the node's, each app's on this node, each client address's, each connection's
	// (session.ReplayBudget).
	ReplayBytesPerSecond, ReplayBytesPerSecondPerApp, ReplayBytesPerSecondPerAddress, ReplayBytesPerSecondPerConnection int
	// Linger is how long a cluster node keeps a history channel's copy after its last local
	// subscriber left (cluster.Config.HistoryLinger); 0: not at all.
	Linger Duration
}

// defaultHistory is what history.* is before any file, variable or flag: replay budgets that
// a public deployment can keep (a client's 10 MiB recovery goes through whole; a loop of
// them from one address is held to 32 MiB/s).
func defaultHistory() HistoryConfig {
	return HistoryConfig{MaxBytesPerApp: 64 << 20, ReplayBytesPerSecond: 256 << 20, ReplayBytesPerSecondPerApp: 128 << 20,
		ReplayBytesPerSecondPerAddress: 32 << 20, ReplayBytesPerSecondPerConnection: 8 << 20, Linger: Duration{time.Minute}}
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
	for _, b := range []struct {
		key string
		v   int
	}{{"history.replay_bytes_per_second", c.History.ReplayBytesPerSecond},
		{"history.replay_bytes_per_second_per_app", c.History.ReplayBytesPerSecondPerApp},
		{"history.replay_bytes_per_second_per_address", c.History.ReplayBytesPerSecondPerAddress},
		{"history.replay_bytes_per_second_per_connection", c.History.ReplayBytesPerSecondPerConnection}} {
		l.atLeast(b.key, b.v, 0)
	}
	if c.History.Linger.Duration < 0 {
		l.problem("history.linger", "%v must not be negative (0: no lingering)", c.History.Linger)
	}
	if r := c.History.Replicas; r < 0 || r > MaxHistoryReplicas {
		l.problem("history.replicas", "%d must be from 0 (one) to %d", r, MaxHistoryReplicas)
	} else if engine, _, err := l.check.BusURL(c.Cluster.URL); r > 0 && (c.Cluster.URL == "" || err == nil && engine != "nats") {
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
