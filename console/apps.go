package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/guard"
)

// AppAdmin is what the apps API needs of the node's apps: cmd/herald adapts the app store
// (an appstore.Store with its Writer) to it. Writes return errors wrapping appstore.ErrExists
// and appstore.ErrNotFound where they apply; once a write returns, this node has the change.
type AppAdmin interface {
	// Apps lists every app.
	Apps() []*herald.App
	// App returns one.
	App(id string) (*herald.App, bool)
	// Writable reports whether apps can be written here (an app store), and why not.
	Writable() (ok bool, why string)
	Create(ctx context.Context, a herald.App) error
	Update(ctx context.Context, a herald.App) error
}

// appJSON is an app as the apps API reads and writes it: the configuration's key names,
// never the secret (but in the answer of a create or a rotation: shown once).
type appJSON struct {
	ID                           string     `json:"id"`
	Key                          string     `json:"key"`
	Secret                       string     `json:"secret,omitempty"`
	Enabled                      bool       `json:"enabled"`
	EnableClientMessages         bool       `json:"enable_client_messages"`
	EnableUserAuthentication     bool       `json:"enable_user_authentication"`
	EnableSubscriptionCountEvent bool       `json:"enable_subscription_count_event"`
	AllowedOrigins               []string   `json:"allowed_origins"`
	Limits                       limitsJSON `json:"limits"`
	// History are the app's history rules (its history column): see docs/app-stores.md.
	History     []appstore.HistoryRuleJSON `json:"history"`
	Connections *int64                     `json:"connections,omitempty"` // on this node, in the list
}

// limitsJSON are the limits the apps API sets (0: the default).
type limitsJSON struct {
	MaxConnections           int `json:"max_connections"`
	MaxChannelNameLength     int `json:"max_channel_name_length"`
	MaxEventNameLength       int `json:"max_event_name_length"`
	MaxEventPayloadBytes     int `json:"max_event_payload_bytes"`
	MaxChannelsPerEvent      int `json:"max_channels_per_event"`
	MaxBatchSize             int `json:"max_batch_size"`
	MaxPresenceMembers       int `json:"max_presence_members"`
	MaxPresenceMemberBytes   int `json:"max_presence_member_bytes"`
	MaxClientEventsPerSecond int `json:"max_client_events_per_second"`
	MaxAPIRequestsPerSecond  int `json:"max_api_requests_per_second"`
}

func toJSON(a *herald.App) appJSON {
	l := a.Limits
	return appJSON{ID: a.ID, Key: a.Key, Enabled: !a.Disabled, EnableClientMessages: a.EnableClientMessages,
		EnableUserAuthentication: a.EnableUserAuthentication, EnableSubscriptionCountEvent: a.EnableSubscriptionCountEvent,
		AllowedOrigins: append([]string{}, a.AllowedOrigins...), History: appstore.HistoryJSON(a.History),
		Limits: limitsJSON{MaxConnections: l.MaxConnections, MaxChannelNameLength: l.MaxChannelNameLength,
			MaxEventNameLength: l.MaxEventNameLength, MaxEventPayloadBytes: l.MaxEventPayloadBytes, MaxChannelsPerEvent: l.MaxChannelsPerEvent,
			MaxBatchSize: l.MaxBatchSize, MaxPresenceMembers: l.MaxPresenceMembers, MaxPresenceMemberBytes: l.MaxPresenceMemberBytes,
			MaxClientEventsPerSecond: l.MaxClientEventsPerSecond, MaxAPIRequestsPerSecond: l.MaxAPIRequestsPerSecond}}
}

// apply writes j's fields onto a (not its id, key or secret).
func (j appJSON) apply(a *herald.App) {
	a.Disabled = !j.Enabled
	a.EnableClientMessages, a.EnableUserAuthentication, a.EnableSubscriptionCountEvent = j.EnableClientMessages, j.EnableUserAuthentication, j.EnableSubscriptionCountEvent
	a.AllowedOrigins = j.AllowedOrigins
	a.History = nil
	for _, r := range j.History {
		a.History = append(a.History, r.Rule())
	}
	l := &a.Limits
	l.MaxConnections, l.MaxChannelNameLength, l.MaxEventNameLength = j.Limits.MaxConnections, j.Limits.MaxChannelNameLength, j.Limits.MaxEventNameLength
	l.MaxEventPayloadBytes, l.MaxChannelsPerEvent, l.MaxBatchSize = j.Limits.MaxEventPayloadBytes, j.Limits.MaxChannelsPerEvent, j.Limits.MaxBatchSize
	l.MaxPresenceMembers, l.MaxPresenceMemberBytes = j.Limits.MaxPresenceMembers, j.Limits.MaxPresenceMemberBytes
	l.MaxClientEventsPerSecond, l.MaxAPIRequestsPerSecond = j.Limits.MaxClientEventsPerSecond, j.Limits.MaxAPIRequestsPerSecond
}

// check validates an app about to be written.
func check(j appJSON) error {
	name := func(field, v string) error {
		if v == "" || len(v) > 255 || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != "" {
			return fmt.Errorf("%s %q: want 1 to 255 letters, digits, '_', '.' or '-'", field, v)
		}
		return nil
	}
	if err := name("id", j.ID); err != nil {
		return err
	}
	if err := name("key", j.Key); err != nil {
		return err
	}
	l := j.Limits
	for field, v := range map[string]int{"max_connections": l.MaxConnections, "max_channel_name_length": l.MaxChannelNameLength,
		"max_event_name_length": l.MaxEventNameLength, "max_event_payload_bytes": l.MaxEventPayloadBytes,
		"max_channels_per_event": l.MaxChannelsPerEvent, "max_batch_size": l.MaxBatchSize, "max_presence_members": l.MaxPresenceMembers,
		"max_presence_member_bytes": l.MaxPresenceMemberBytes, "max_client_events_per_second": l.MaxClientEventsPerSecond,
		"max_api_requests_per_second": l.MaxAPIRequestsPerSecond} {
		if v < 0 {
			return fmt.Errorf("limits.%s: %d must not be negative (0 is the default)", field, v)
		}
	}
	if _, err := guard.ParseOrigins(j.AllowedOrigins); err != nil {
		return fmt.Errorf("allowed_origins: %v", err)
	}
	for i, r := range j.History {
		if p := r.Rule().Check(); len(p) > 0 {
			return fmt.Errorf("history[%d].%v", i, p[0])
		}
	}
	return nil
}

// token returns n random bytes in hex: keys and secrets are made here, never chosen.
func token(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func apiError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]any{"error": fmt.Sprintf(format, args...), "code": status})
}

// maxAppBody bounds an apps API request body.
const maxAppBody = 64 << 10

// readApp reads a JSON body (its type checked by jsonOnly) onto j; a problem answers 4xx and
// returns false.
func readApp(w http.ResponseWriter, r *http.Request, j *appJSON) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAppBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(j); err != nil {
		apiError(w, http.StatusBadRequest, "apps: the body is not an app: %v", err)
		return false
	}
	return true
}

// writable answers 405 and returns false when the apps cannot be written here.
func (c *Console) writable(w http.ResponseWriter) bool {
	if c.cfg.Admin == nil {
		w.Header().Set("Allow", "GET")
		apiError(w, http.StatusMethodNotAllowed, "apps: this node has no apps API")
		return false
	}
	if ok, why := c.cfg.Admin.Writable(); !ok {
		w.Header().Set("Allow", "GET")
		apiError(w, http.StatusMethodNotAllowed, "apps: %s", why)
		return false
	}
	return true
}

// written answers a write's error with its status, or nothing (false) when there is none.
func written(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, appstore.ErrExists):
		apiError(w, http.StatusConflict, "apps: %v", err)
	case errors.Is(err, appstore.ErrNotFound):
		apiError(w, http.StatusNotFound, "apps: no such app")
	case errors.Is(err, context.DeadlineExceeded):
		apiError(w, http.StatusServiceUnavailable, "apps: the app store did not answer in time")
	default:
		apiError(w, http.StatusServiceUnavailable, "apps: the app store refused the write: %v", err)
	}
	return true
}

// writeTimeout bounds one write to the app store.
const writeTimeout = 10 * time.Second

// listApps answers GET /console/api/apps: every app, by id, without secrets, with this
// node's connections.
func (c *Console) listApps(w http.ResponseWriter, r *http.Request) {
	var out []appJSON
	conns := map[string]int64{}
	if st := c.latest.Load(); st != nil {
		for _, a := range st.Apps {
			conns[a.ID] = a.Connections
		}
	}
	ok, why := false, "this node has no apps API"
	if c.cfg.Admin != nil {
		for _, a := range c.cfg.Admin.Apps() {
			j := toJSON(a)
			n := conns[a.ID]
			j.Connections = &n
			out = append(out, j)
		}
		ok, why = c.cfg.Admin.Writable()
	}
	if out == nil {
		out = []appJSON{}
	}
	res := map[string]any{"apps": out, "writable": ok}
	if !ok {
		res["why"] = why
	}
	writeJSON(w, http.StatusOK, res)
}

// getApp answers GET /console/api/apps/{id}.
func (c *Console) getApp(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Admin == nil {
		apiError(w, http.StatusNotFound, "apps: no such app")
		return
	}
	a, ok := c.cfg.Admin.App(r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "apps: no such app")
		return
	}
	writeJSON(w, http.StatusOK, toJSON(a))
}

// createApp answers POST /console/api/apps: the id may be given, the key and the secret are
// made here; the answer shows the secret, once.
func (c *Console) createApp(w http.ResponseWriter, r *http.Request) {
	if !c.writable(w) {
		return
	}
	j := appJSON{Enabled: true}
	if !readApp(w, r, &j) {
		return
	}
	if j.Secret != "" || j.Key != "" {
		apiError(w, http.StatusBadRequest, "apps: the key and the secret are made by herald: leave them out")
		return
	}
	if j.ID == "" {
		j.ID = "app-" + token(6)
	}
	j.Key = token(10)
	if err := check(j); err != nil {
		apiError(w, http.StatusBadRequest, "apps: %v", err)
		return
	}
	a := herald.App{ID: j.ID, Key: j.Key, Secret: token(16)}
	j.apply(&a)
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	if written(w, c.cfg.Admin.Create(ctx, a)) {
		return
	}
	c.log.Info("apps API: app created", "app_id", a.ID, "key", a.Key)
	out := toJSON(&a)
	out.Secret = a.Secret
	writeJSON(w, http.StatusCreated, out)
}

// change reads app id, lets f change it and writes it back; it answers the app (and, when
// show is set, its new secret).
func (c *Console) change(w http.ResponseWriter, r *http.Request, what string, show bool, f func(a *herald.App) error) {
	if !c.writable(w) {
		return
	}
	cur, ok := c.cfg.Admin.App(r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "apps: no such app")
		return
	}
	a := *cur
	if err := f(&a); err != nil {
		if err != errAnswered {
			apiError(w, http.StatusBadRequest, "apps: %v", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
	defer cancel()
	if written(w, c.cfg.Admin.Update(ctx, a)) {
		return
	}
	c.log.Info("apps API: app "+what, "app_id", a.ID)
	out := toJSON(&a)
	if show {
		out.Secret = a.Secret
	}
	writeJSON(w, http.StatusOK, out)
}

// updateApp answers PATCH /console/api/apps/{id}: the fields given replace the app's (its
// id, key and secret stay).
func (c *Console) updateApp(w http.ResponseWriter, r *http.Request) {
	c.change(w, r, "updated", false, func(a *herald.App) error {
		j := toJSON(a)
		if !readApp(w, r, &j) {
			return errAnswered
		}
		if j.ID != a.ID || j.Key != a.Key || j.Secret != "" {
			return errors.New("the id, the key and the secret cannot be changed here (rotate the secret with POST .../rotate-secret)")
		}
		if err := check(j); err != nil {
			return err
		}
		j.apply(a)
		return nil
	})
}

// errAnswered is a change whose request was answered already (a bad body).
var errAnswered = errors.New("answered")

func (c *Console) setEnabled(on bool) http.HandlerFunc {
	what := map[bool]string{true: "enabled", false: "disabled"}[on]
	return func(w http.ResponseWriter, r *http.Request) {
		c.change(w, r, what, false, func(a *herald.App) error { a.Disabled = !on; return nil })
	}
}

// rotateSecret answers POST /console/api/apps/{id}/rotate-secret with the new secret, once.
func (c *Console) rotateSecret(w http.ResponseWriter, r *http.Request) {
	c.change(w, r, "secret rotated", true, func(a *herald.App) error { a.Secret = token(16); return nil })
}
