package appstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/herald-rt/herald"
)

// The history column is herald's own (Soketi's and Sockudo's tables have none): the app's
// history rules (herald.App.History), a JSON array of
//
//	{"channels": "auction-*", "size": 1000, "ttl": "10m"}
//
// as the file's apps[].history: ttl is a Go duration ("10m", "1h30m") or a number of
// seconds (600, or "600"). NULL, "" and [] are no rule. A rule herald cannot keep (checked
// as the file's are, herald.HistoryRule.Check, or with a key herald does not know) is left
// out and the app is served without it: Mapping.App returns the app with a *HistoryError
// saying what was left out, and the Store logs it and counts the app (Status.BadHistory).
// The apps API writes the column with the rules herald serves (NULL for none), on an
// insert and on an update.

// HistoryError is what a row's history column held that herald cannot keep: the app is
// served without it.
type HistoryError struct {
	App      string
	Problems []string // one for each rule left out, or one for a column that is no list
}

func (e *HistoryError) Error() string {
	return "column history: " + strings.Join(e.Problems, "; ") + " (the app is served without it)"
}

// historyField is the history column: read into App.History, written by inserts and
// updates.
var historyField = Field{Names: []string{"history"}, get: historyValue, set: setHistory}

// HistoryRuleJSON is one history rule as the history column and the apps API write it.
type HistoryRuleJSON struct {
	Channels string `json:"channels"`
	Size     int    `json:"size"`
	TTL      TTL    `json:"ttl"`
}

// Rule is the rule r writes.
func (r HistoryRuleJSON) Rule() herald.HistoryRule {
	return herald.HistoryRule{Channels: r.Channels, Size: r.Size, TTL: time.Duration(r.TTL)}
}

// HistoryJSON writes rules as the history column holds them.
func HistoryJSON(rules []herald.HistoryRule) []HistoryRuleJSON {
	out := make([]HistoryRuleJSON, len(rules))
	for i, r := range rules {
		out[i] = HistoryRuleJSON{Channels: r.Channels, Size: r.Size, TTL: TTL(r.TTL)}
	}
	return out
}

// TTL is a history rule's ttl in JSON: written as a Go duration without its zero minutes
// and seconds ("10m", "1h", "1h30m", "1m30s", "500ms"), read from such a string or from a
// number of seconds (600, or "600").
type TTL time.Duration

// MarshalJSON implements json.Marshaler.
func (d TTL) MarshalJSON() ([]byte, error) {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return json.Marshal(s)
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *TTL) UnmarshalJSON(b []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = strings.TrimSpace(x)
	default:
		return ttlError(fmt.Sprintf("ttl %s: want a duration such as \"10m\" or a number of seconds", b))
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
			return ttlError(fmt.Sprintf("ttl %s: out of range", s))
		}
		*d = TTL(f * float64(time.Second))
		return nil
	}
	t, err := time.ParseDuration(s)
	if err != nil {
		return ttlError(fmt.Sprintf("ttl %q: want a duration such as \"10m\" or a number of seconds", s))
	}
	*d = TTL(t)
	return nil
}

// ttlError is a ttl that is no duration.
type ttlError string

func (e ttlError) Error() string { return string(e) }

func historyValue(a *herald.App) any {
	if len(a.History) == 0 {
		return nil
	}
	b, _ := json.Marshal(HistoryJSON(a.History))
	return string(b)
}

// setHistory reads the column into a.History, leaving out the rules herald cannot keep
// (the *HistoryError says which).
func setHistory(a *herald.App, v any) error {
	list, err := jsonArray(v, "rules")
	if err != nil {
		return &HistoryError{Problems: []string{err.Error()}}
	}
	var problems []string
	for i, raw := range list {
		r, err := readHistoryRule(raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("history[%d] left out: %v", i, err))
			continue
		}
		a.History = append(a.History, r)
	}
	if len(problems) > 0 {
		return &HistoryError{Problems: problems}
	}
	return nil
}

// readHistoryRule reads one rule, checked as the configuration file's are.
func readHistoryRule(raw json.RawMessage) (herald.HistoryRule, error) {
	var hr HistoryRuleJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hr); err != nil {
		if te := ttlError(""); errors.As(err, &te) {
			return herald.HistoryRule{}, te
		}
		return herald.HistoryRule{}, fmt.Errorf("not a rule {\"channels\": ..., \"size\": ..., \"ttl\": ...}: %v", err)
	}
	r := hr.Rule()
	var msgs []string
	for _, p := range r.Check() {
		msgs = append(msgs, p.Error())
	}
	if len(msgs) > 0 {
		return r, errors.New(strings.Join(msgs, ", "))
	}
	return r, nil
}
