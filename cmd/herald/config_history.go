package main

import (
	"fmt"
	"strings"
	"time"

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

// Bounds of a history rule: a channel keeps at most maxHistorySize events, each at most
// maxHistoryTTL.
const (
	maxHistorySize = 100_000
	maxHistoryTTL  = 7 * 24 * time.Hour
)

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
		for j, h := range a.History {
			at := fmt.Sprintf("apps[%d].history[%d]", i, j)
			switch {
			case h.Channels == "":
				l.problem(at+".channels", "must name the channels, e.g. \"auction-*\"")
			case strings.HasPrefix(h.Channels, "private-encrypted-"):
				l.problem(at+".channels", "%q: encrypted channels keep no history", h.Channels)
			case strings.Trim(h.Channels, "*") != "" && !validGlob(h.Channels):
				l.problem(at+".channels", "%q holds a character no channel name has", h.Channels)
			}
			if h.Size < 1 || h.Size > maxHistorySize {
				l.problem(at+".size", "%d must be from 1 to %d", h.Size, maxHistorySize)
			}
			if h.TTL.Duration <= 0 || h.TTL.Duration > maxHistoryTTL {
				l.problem(at+".ttl", "%v must be more than 0 and at most %v", h.TTL, maxHistoryTTL)
			}
		}
	}
}

// validGlob reports whether every character of a glob but '*' may be in a channel name.
func validGlob(g string) bool {
	for _, r := range g {
		switch {
		case r == '*', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("_-=@,.;#", r):
		default:
			return false
		}
	}
	return true
}

// historyRules converts an app's configured rules.
func (a AppConfig) historyRules() []herald.HistoryRule {
	var out []herald.HistoryRule
	for _, h := range a.History {
		out = append(out, herald.HistoryRule{Channels: h.Channels, Size: h.Size, TTL: h.TTL.Duration})
	}
	return out
}
