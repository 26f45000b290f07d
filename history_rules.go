package herald

import (
	"fmt"
	"strings"
	"time"
)

// Bounds of a history rule: a channel keeps at most MaxHistorySize events, each for at most
// MaxHistoryTTL.
const (
	MaxHistorySize = 100_000
	MaxHistoryTTL  = 7 * 24 * time.Hour
)

// RuleProblem is what is wrong with one field of a history rule: Field is "channels",
// "size" or "ttl" (or "apps", of an AppsHistoryRule).
type RuleProblem struct {
	Field, Problem string
}

func (p RuleProblem) Error() string { return p.Field + ": " + p.Problem }

// Check returns what is wrong with r, field by field (none: r is a rule herald keeps):
// Channels a glob of the characters channel names have, not naming encrypted channels
// (which keep no history), Size from 1 to MaxHistorySize, TTL more than 0 and at most
// MaxHistoryTTL. The configuration file's rules and the app stores' are checked alike.
func (r HistoryRule) Check() []RuleProblem {
	var out []RuleProblem
	add := func(field, format string, args ...any) {
		out = append(out, RuleProblem{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case r.Channels == "":
		add("channels", "must name the channels, e.g. \"auction-*\"")
	case strings.HasPrefix(r.Channels, "private-encrypted-"):
		add("channels", "%q: encrypted channels keep no history", r.Channels)
	case !ValidChannelGlob(r.Channels):
		add("channels", "%q holds a character no channel name has", r.Channels)
	}
	if r.Size < 1 || r.Size > MaxHistorySize {
		add("size", "%d must be from 1 to %d", r.Size, MaxHistorySize)
	}
	if r.TTL <= 0 || r.TTL > MaxHistoryTTL {
		add("ttl", "%v must be more than 0 and at most %v", r.TTL, MaxHistoryTTL)
	}
	return out
}

// channelNameChars are the characters of a channel name besides letters and digits.
const channelNameChars = "_-=@,.;#"

// appIDChars are the characters of an app id besides letters and digits.
const appIDChars = "_.-"

// ValidChannelGlob reports whether every character of glob but '*' may be in a channel name.
func ValidChannelGlob(glob string) bool { return validGlob(glob, channelNameChars) }

// validGlob reports whether every character of glob but '*' is a letter, a digit or one of
// others.
func validGlob(glob, others string) bool {
	for _, r := range glob {
		switch {
		case r == '*', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune(others, r):
		default:
			return false
		}
	}
	return true
}

// AppsHistoryRule is a history rule for every app whose id matches Apps, a glob as
// HistoryRule.Channels is: what an operator sets for the apps of an app store without
// writing each app's own rules (the configuration's app_store.history).
type AppsHistoryRule struct {
	Apps string
	HistoryRule
}

// Check returns what is wrong with r, as HistoryRule.Check does, and with Apps: a glob of
// the characters app ids have.
func (r AppsHistoryRule) Check() []RuleProblem {
	var out []RuleProblem
	switch {
	case r.Apps == "":
		out = append(out, RuleProblem{Field: "apps", Problem: "must name the apps by id, e.g. \"*\" or \"tenant-*\""})
	case !validGlob(r.Apps, appIDChars):
		out = append(out, RuleProblem{Field: "apps", Problem: fmt.Sprintf("%q holds a character no app id has", r.Apps)})
	}
	return append(out, r.HistoryRule.Check()...)
}

// HistoryRules returns the history rules of a's channels given the rules for apps by id:
// a's own (a.History) first, then the Rule of each of byID whose Apps matches a's id, in
// order. The first rule that matches a channel is its rule, so a's own rule for a channel
// wins over one for many apps. It returns a.History itself when none of byID matches.
func (a *App) HistoryRules(byID []AppsHistoryRule) []HistoryRule {
	var out []HistoryRule
	for _, r := range byID {
		if Glob(r.Apps, a.ID) {
			if out == nil {
				out = append(make([]HistoryRule, 0, len(a.History)+len(byID)), a.History...)
			}
			out = append(out, r.HistoryRule)
		}
	}
	if out == nil {
		return a.History
	}
	return out
}
