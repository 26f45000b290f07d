package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/herald-rt/herald"
)

// event is one webhook event, with Pusher's field names.
type event struct {
	Name              string  `json:"name"`
	Channel           string  `json:"channel"`
	UserID            string  `json:"user_id,omitempty"`
	Event             string  `json:"event,omitempty"`
	Data              *string `json:"data,omitempty"`
	SocketID          string  `json:"socket_id,omitempty"`
	SubscriptionCount *int    `json:"subscription_count,omitempty"`
}

// names maps activity kinds to webhook event names.
var names = func() map[herald.ActivityKind]string {
	m := map[herald.ActivityKind]string{}
	for n, k := range kinds {
		m[k] = n
	}
	return m
}()

// eventOf turns an activity into its webhook event; ok is false for kinds no webhook sends.
func eventOf(a *herald.Activity) (ev event, ok bool) {
	name, ok := names[a.Kind]
	if !ok {
		return ev, false
	}
	ev = event{Name: name, Channel: a.Channel}
	switch a.Kind {
	case herald.MemberAdded, herald.MemberRemoved:
		ev.UserID = a.UserID
	case herald.ClientEvent:
		data := a.Data
		ev.Event, ev.Data, ev.SocketID, ev.UserID = a.Event, &data, a.SocketID, a.UserID
	case herald.SubscriptionCount:
		n := a.Count
		ev.SubscriptionCount = &n
	}
	return ev, true
}

// body is a request's JSON: {"time_ms": ..., "events": [...]}.
func body(now time.Time, evs []event) []byte {
	b, _ := json.Marshal(struct {
		TimeMS int64   `json:"time_ms"`
		Events []event `json:"events"`
	}{now.UnixMilli(), evs})
	return b
}

// Sign is X-Pusher-Signature: the hex HMAC-SHA256 of the body with the app's secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
