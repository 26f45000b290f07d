package webhook

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/herald-rt/herald"
)

// Webhook is one URL an app's events are posted to (herald.Webhook).
type Webhook = herald.Webhook

// Filter keeps the events of the channels whose names start and end as given ("" = any).
type Filter = herald.WebhookFilter

func keeps(f Filter, channel string) bool {
	return strings.HasPrefix(channel, f.ChannelNameStartsWith) && strings.HasSuffix(channel, f.ChannelNameEndsWith)
}

// App is one app's credentials and webhooks.
type App struct {
	ID, Key, Secret string
	Webhooks        []Webhook
}

// Options tunes a Sender. Zero values mean the defaults noted.
type Options struct {
	BatchInterval   time.Duration // how long events gather before a request; default 250ms
	MaxBatch        int           // most events in one request; default 100
	LeaveDelay      time.Duration // channel_vacated and member_removed wait this long; default 3s; negative: no delay
	Timeout         time.Duration // one request, connection included; default 10s
	RetryFor        time.Duration // how long a batch is retried from its first attempt; default 5m
	RetryMinBackoff time.Duration // the first retry's wait (before jitter); default 500ms
	RetryMaxBackoff time.Duration // the longest wait between attempts; default 30s
	QueueSize       int           // events waiting per webhook (delayed ones included); default 10,000

	// Latency, when set, observes each request's duration (app id, seconds).
	Latency func(appID string, seconds float64)
	// Present, when set, reports whether channel is occupied (user "") or user is a member of
	// it now, anywhere in the cluster. A leave whose delay ends while its channel is occupied
	// (its member back) again is not sent: another node saw the return and sent its
	// channel_occupied (member_added), which no pending leave here could cancel.
	Present func(appID, channel, user string) bool
	// Sent, when set, is told of each event once its request got an answer (a status):
	// the console shows webhooks sent (herald.WebhookSent).
	Sent func(appID string, a *herald.Activity)
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.BatchInterval, 250*time.Millisecond)
	def(&o.LeaveDelay, 3*time.Second)
	def(&o.Timeout, 10*time.Second)
	def(&o.RetryFor, 5*time.Minute)
	def(&o.RetryMinBackoff, 500*time.Millisecond)
	def(&o.RetryMaxBackoff, 30*time.Second)
	if o.MaxBatch <= 0 {
		o.MaxBatch = 100
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 10_000
	}
	return o
}

// The webhook events, by their Pusher names.
const (
	ChannelOccupied   = "channel_occupied"
	ChannelVacated    = "channel_vacated"
	MemberAdded       = "member_added"
	MemberRemoved     = "member_removed"
	ClientEvent       = "client_event"
	CacheMiss         = "cache_miss"
	SubscriptionCount = "subscription_count"
)

// kinds maps each webhook event to the activity it comes from.
var kinds = map[string]herald.ActivityKind{
	ChannelOccupied:   herald.ChannelOccupied,
	ChannelVacated:    herald.ChannelVacated,
	MemberAdded:       herald.MemberAdded,
	MemberRemoved:     herald.MemberRemoved,
	ClientEvent:       herald.ClientEvent,
	CacheMiss:         herald.CacheMiss,
	SubscriptionCount: herald.SubscriptionCount,
}

// EventTypes lists the webhook events, in the order of Pusher's documentation.
var EventTypes = []string{ChannelOccupied, ChannelVacated, MemberAdded, MemberRemoved, ClientEvent, CacheMiss, SubscriptionCount}

// CheckURL reports what is wrong with a webhook URL: it must be absolute http or https. Its
// errors never echo the URL's password or query (see Redacted).
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return fmt.Errorf("must not be empty")
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("is not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http:// or https:// URL", Redacted(raw))
	case u.Host == "":
		return fmt.Errorf("%q has no host", Redacted(raw))
	}
	return nil
}

// CheckEventType reports an unknown event type.
func CheckEventType(name string) error {
	if _, ok := kinds[name]; !ok {
		return fmt.Errorf("%q is not one of %s", name, strings.Join(EventTypes, ", "))
	}
	return nil
}

// CheckHeader reports a header that cannot be sent as given.
func CheckHeader(name, value string) error {
	if name == "" || strings.ContainsAny(name, " \t\r\n:()<>@,;\\\"/[]?={}") {
		return fmt.Errorf("%q is not a valid header name", name)
	}
	if i := strings.IndexFunc(value, isControl); i >= 0 {
		return fmt.Errorf("the value of %s holds a control character (%q at byte %d)", name, value[i], i)
	}
	switch strings.ToLower(name) {
	case "x-pusher-key", "x-pusher-signature", "content-type", "content-length", "host":
		return fmt.Errorf("%s is set by herald", name)
	}
	return nil
}

// isControl reports an ASCII control character (tab included) or DEL: none may be sent in a
// header value (a CR or LF would split the request, the others are refused by receivers or
// mean something to the proxies between).
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
