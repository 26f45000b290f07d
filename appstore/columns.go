package appstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/herald-rt/herald"
)

// Field is one thing herald reads from (and the apps API writes to) an apps table, under the
// first of its column names the table has. Soketi's name comes first, then Sockudo's.
type Field struct {
	Names []string
	// Required fields must have a column: a table without one is refused at start.
	Required bool
	// Bool fields are written as 0/1 to an integer column (Soketi's smallint and tinyint(1))
	// and as true/false to a boolean one.
	Bool bool
	// Keep fields are written by an insert (a NOT NULL column of Soketi's needs a value) and
	// left as they are by an update: herald does not hold their value.
	Keep bool
	// get reads the field from an app, as the column stores it.
	get func(a *herald.App) any
	// set stores a column's value (non-NULL, normalised by the adapter to int64, float64,
	// bool, string or []byte) in a.
	set func(a *herald.App, v any) error
}

// Unlimited is the value herald keeps for a rate Soketi stores as -1 (no limit) where
// herald's zero means the default: MaxClientEventsPerSecond.
const Unlimited = math.MaxInt32

// kib converts Soketi's kilobyte limits (fractions allowed) to bytes.
func kib(v any) (int, error) {
	f, err := toFloat(v)
	return int(f * 1024), err
}

// limit stores a Soketi limit: -1 (or any value below 1) means herald's default.
func limit(dst func(l *herald.Limits) *int, conv func(any) (int, error)) func(a *herald.App, v any) error {
	return func(a *herald.App, v any) error {
		n, err := conv(v)
		if err != nil {
			return err
		}
		*dst(&a.Limits) = max(n, 0)
		return nil
	}
}

func flag(dst func(a *herald.App) *bool) func(a *herald.App, v any) error {
	return func(a *herald.App, v any) error {
		b, err := toBool(v)
		*dst(a) = b
		return err
	}
}

func text(dst func(a *herald.App) *string) func(a *herald.App, v any) error {
	return func(a *herald.App, v any) error {
		s, err := toString(v)
		*dst(a) = s
		return err
	}
}

// orNone writes a limit as Soketi stores "none": -1.
func orNone(n int) any {
	if n <= 0 {
		return int64(-1)
	}
	return int64(n)
}

// Fields are the columns herald knows, by what they mean. See docs/app-stores.md.
var Fields = []Field{
	{Names: []string{"id"}, Required: true, get: func(a *herald.App) any { return a.ID }, set: text(func(a *herald.App) *string { return &a.ID })},
	{Names: []string{"key"}, Required: true, get: func(a *herald.App) any { return a.Key }, set: text(func(a *herald.App) *string { return &a.Key })},
	{Names: []string{"secret"}, Required: true, get: func(a *herald.App) any { return a.Secret }, set: text(func(a *herald.App) *string { return &a.Secret })},
	{Names: []string{"max_connections"}, get: func(a *herald.App) any { return orNone(a.Limits.MaxConnections) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxConnections }, toInt)},
	{Names: []string{"enable_client_messages"}, Bool: true, get: func(a *herald.App) any { return a.EnableClientMessages },
		set: flag(func(a *herald.App) *bool { return &a.EnableClientMessages })},
	{Names: []string{"enabled"}, Bool: true, get: func(a *herald.App) any { return !a.Disabled },
		set: func(a *herald.App, v any) error { b, err := toBool(v); a.Disabled = !b; return err }},
	// herald has one REST rate, in requests: Soketi's rate of events sent over the REST API
	// is the closest (one event per request, the common case).
	{Names: []string{"max_backend_events_per_sec", "max_backend_events_per_second"}, get: func(a *herald.App) any { return orNone(a.Limits.MaxAPIRequestsPerSecond) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxAPIRequestsPerSecond }, toInt)},
	{Names: []string{"max_client_events_per_sec", "max_client_events_per_second"},
		get: func(a *herald.App) any {
			switch n := a.Limits.MaxClientEventsPerSecond; {
			case n >= Unlimited:
				return int64(-1)
			case n <= 0: // herald's default, written as its value: Soketi's -1 is no limit
				return int64(herald.DefaultLimits.MaxClientEventsPerSecond)
			default:
				return int64(n)
			}
		},
		set: func(a *herald.App, v any) error {
			n, err := toInt(v)
			if n < 0 {
				n = Unlimited // Soketi's -1: no limit
			}
			a.Limits.MaxClientEventsPerSecond = n
			return err
		}},
	// Read for Soketi's schema (NOT NULL there, so the apps API writes -1), not enforced:
	// herald's one REST rate is max_backend_events_per_sec.
	{Names: []string{"max_read_req_per_sec", "max_read_requests_per_second"}, Keep: true, get: func(*herald.App) any { return int64(-1) },
		set: func(*herald.App, any) error { return nil }},
	{Names: []string{"max_presence_members_per_channel"}, get: func(a *herald.App) any { return nullable(a.Limits.MaxPresenceMembers) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxPresenceMembers }, toInt)},
	{Names: []string{"max_presence_member_size_in_kb"}, get: func(a *herald.App) any { return nullableKiB(a.Limits.MaxPresenceMemberBytes) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxPresenceMemberBytes }, kib)},
	{Names: []string{"max_channel_name_length"}, get: func(a *herald.App) any { return nullable(a.Limits.MaxChannelNameLength) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxChannelNameLength }, toInt)},
	{Names: []string{"max_event_channels_at_once"}, get: func(a *herald.App) any { return nullable(a.Limits.MaxChannelsPerEvent) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxChannelsPerEvent }, toInt)},
	{Names: []string{"max_event_name_length"}, get: func(a *herald.App) any { return nullable(a.Limits.MaxEventNameLength) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxEventNameLength }, toInt)},
	{Names: []string{"max_event_payload_in_kb"}, get: func(a *herald.App) any { return nullableKiB(a.Limits.MaxEventPayloadBytes) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxEventPayloadBytes }, kib)},
	{Names: []string{"max_event_batch_size"}, get: func(a *herald.App) any { return nullable(a.Limits.MaxBatchSize) },
		set: limit(func(l *herald.Limits) *int { return &l.MaxBatchSize }, toInt)},
	{Names: []string{"enable_user_authentication"}, Bool: true, get: func(a *herald.App) any { return a.EnableUserAuthentication },
		set: flag(func(a *herald.App) *bool { return &a.EnableUserAuthentication })},
	webhooksField, // webhooks.go
	// herald's own, optional.
	{Names: []string{"enable_subscription_count_event"}, Bool: true, get: func(a *herald.App) any { return a.EnableSubscriptionCountEvent },
		set: flag(func(a *herald.App) *bool { return &a.EnableSubscriptionCountEvent })},
	{Names: []string{"allowed_origins"}, get: func(a *herald.App) any { return strings.Join(a.AllowedOrigins, ",") },
		set: func(a *herald.App, v any) error {
			s, err := toString(v)
			a.AllowedOrigins = splitOrigins(s)
			return err
		}},
	historyField, // history.go
}

// UpdatedAt is the optional column whose changes polling watches (the table's
// fingerprint); Sockudo's table has it, Soketi's does not.
const UpdatedAt = "updated_at"

func nullable(n int) any {
	if n <= 0 {
		return nil
	}
	return int64(n)
}

func nullableKiB(n int) any {
	if n <= 0 {
		return nil
	}
	return int64(math.Ceil(float64(n) / 1024))
}

// splitOrigins reads allowed_origins: a JSON array of strings, or origins separated by
// commas or white space.
func splitOrigins(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var list []string
	if strings.HasPrefix(s, "[") && json.Unmarshal([]byte(s), &list) == nil {
		return list
	}
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}

// Column is one column of the table, as the adapter found it.
type Column struct {
	Name string
	Bool bool // a boolean column (true/false), not an integer one (0/1)
}

// Mapping is which column of a table holds each Field: what an adapter selects and writes.
type Mapping struct {
	Fields    []Field  // the fields the table has a column for, in Fields' order
	Columns   []Column // their columns, in the same order
	UpdatedAt bool     // the table has updated_at
}

// Map finds the column of each field among the table's (by name, case-insensitively); it
// fails when a required one is missing.
func Map(table string, cols []Column) (Mapping, error) {
	have := map[string]Column{}
	for _, c := range cols {
		have[strings.ToLower(c.Name)] = c
	}
	var m Mapping
	_, m.UpdatedAt = have[UpdatedAt]
	for _, f := range Fields {
		found := false
		for _, n := range f.Names {
			if c, ok := have[n]; ok {
				m.Fields = append(m.Fields, f)
				m.Columns = append(m.Columns, c)
				found = true
				break
			}
		}
		if !found && f.Required {
			return Mapping{}, fmt.Errorf("table %s has no column %s", table, f.Names[0])
		}
	}
	return m, nil
}

// App builds an app from one row: vals[i] is the value of m.Columns[i] (nil for NULL,
// which means the default).
//
// A webhook herald cannot send, or a history rule it cannot keep, is no reason to refuse the
// app: it is left out, and the app comes with a *WebhookError or a *HistoryError (or both,
// joined) saying what (see webhooks.go and history.go).
func (m Mapping) App(vals []any) (herald.App, error) {
	var a herald.App
	var hooks *WebhookError
	var hist *HistoryError
	for i, f := range m.Fields {
		if vals[i] == nil {
			continue // NULL: the default (and enabled NULL: enabled, as in Soketi)
		}
		if err := f.set(&a, vals[i]); err != nil {
			if errors.As(err, &hooks) || errors.As(err, &hist) {
				continue
			}
			return a, fmt.Errorf("column %s: %w", m.Columns[i].Name, err)
		}
	}
	if a.ID == "" {
		return a, fmt.Errorf("column id is empty")
	}
	var partial []error
	if hooks != nil {
		hooks.App = a.ID
		partial = append(partial, hooks)
	}
	if hist != nil {
		hist.App = a.ID
		partial = append(partial, hist)
	}
	return a, errors.Join(partial...)
}

// Values are a's values of m.Columns, in order, booleans written as each column takes them.
// An update skips the Keep fields' (see Updates).
func (m Mapping) Values(a *herald.App) []any {
	out := make([]any, len(m.Fields))
	for i, f := range m.Fields {
		v := f.get(a)
		if b, ok := v.(bool); ok && !m.Columns[i].Bool {
			v = int64(0)
			if b {
				v = int64(1)
			}
		}
		out[i] = v
	}
	return out
}

func toInt(v any) (int, error) {
	switch x := v.(type) {
	case int64:
		return int(max(min(x, math.MaxInt32), math.MinInt32)), nil
	case float64:
		return int(x), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case string:
		n, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		return int(n), nil
	case []byte:
		return toInt(string(x))
	}
	return 0, fmt.Errorf("%T is not a number", v)
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case int64:
		return float64(x), nil
	case float64:
		return x, nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		return f, nil
	case []byte:
		return toFloat(string(x))
	}
	return 0, fmt.Errorf("%T is not a number", v)
}

func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case int64:
		return x != 0, nil
	case float64:
		return x != 0, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "1", "t", "true", "yes", "y", "on":
			return true, nil
		case "0", "f", "false", "no", "n", "off", "":
			return false, nil
		}
		return false, fmt.Errorf("%q is not a boolean", x)
	case []byte:
		if len(x) == 1 && x[0] <= 1 { // MySQL BIT(1)
			return x[0] == 1, nil
		}
		return toBool(string(x))
	}
	return false, fmt.Errorf("%T is not a boolean", v)
}

func toString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case time.Time:
		return x.Format(time.RFC3339Nano), nil
	}
	return "", fmt.Errorf("%T is not text", v)
}

// jsonArray reads a JSON column that holds an array of what: none for NULL's stand-ins (empty
// text, null), an error when it holds anything but an array.
func jsonArray(v any, what string) ([]json.RawMessage, error) {
	s, err := toString(v)
	if err != nil {
		return nil, err
	}
	if t := strings.TrimSpace(s); t == "" || t == "null" {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return nil, fmt.Errorf("not a JSON array of %s: %v", what, err)
	}
	return list, nil
}

// Normalize turns what a database driver scanned into what Mapping.App takes: integers to
// int64, floats to float64, text to string; nil stays nil.
func Normalize(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return int64(min(x, math.MaxInt64))
	case float32:
		return float64(x)
	case []byte:
		return string(x)
	case []any, map[string]any: // a JSON column, decoded by the driver
		b, _ := json.Marshal(x)
		return string(b)
	}
	return v
}

// Updates are the columns an update writes (all but id and the Keep fields) with a's values.
func (m Mapping) Updates(a *herald.App) (cols []string, vals []any) {
	all := m.Values(a)
	for i, f := range m.Fields {
		if i == 0 || f.Keep {
			continue
		}
		cols = append(cols, m.Columns[i].Name)
		vals = append(vals, all[i])
	}
	return cols, vals
}
