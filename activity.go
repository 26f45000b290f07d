package herald

import "time"

// ActivityKind names one kind of thing that happens in an app which something outside the
// fan-out wants to hear about: webhooks send some kinds to the app's backend, the console shows
// them to an operator.
type ActivityKind uint8

// The kinds of activity. Channel-level kinds (occupied, vacated, members) describe the
// cluster-wide state: in a cluster each fires once for the cluster, on one node.
const (
	ConnectionOpened  ActivityKind = iota + 1 // SocketID, Origin
	ConnectionClosed                          // SocketID, Code
	Subscribed                                // SocketID, Channel, UserID on presence channels
	Unsubscribed                              // SocketID, Channel, UserID on presence channels
	ChannelOccupied                           // Channel: its first subscription, cluster-wide
	ChannelVacated                            // Channel: its last subscription left, cluster-wide
	MemberAdded                               // Channel, UserID: a user's first socket, cluster-wide
	MemberRemoved                             // Channel, UserID: a user's last socket, cluster-wide
	ClientEvent                               // Channel, Event, Data, SocketID, UserID on presence
	APIEvent                                  // Channel, Event, Data, SocketID (excluded) if any
	CacheMiss                                 // Channel: a cache channel subscribed with no event kept
	SubscriptionCount                         // Channel, Count: the channel's subscription count changed
	WebhookSent                               // Event (the webhook's event name), Channel, Code (HTTP status)
	activityKinds
)

var activityNames = [activityKinds]string{
	ConnectionOpened:  "connection_opened",
	ConnectionClosed:  "connection_closed",
	Subscribed:        "subscribed",
	Unsubscribed:      "unsubscribed",
	ChannelOccupied:   "channel_occupied",
	ChannelVacated:    "channel_vacated",
	MemberAdded:       "member_added",
	MemberRemoved:     "member_removed",
	ClientEvent:       "client_event",
	APIEvent:          "api_event",
	CacheMiss:         "cache_miss",
	SubscriptionCount: "subscription_count",
	WebhookSent:       "webhook_sent",
}

// String returns the kind's snake_case name, the same as Pusher's webhook event name where
// Pusher has one.
func (k ActivityKind) String() string {
	if k == 0 || k >= activityKinds {
		return "unknown"
	}
	return activityNames[k]
}

// ActivitySet is a set of kinds, one bit each.
type ActivitySet uint32

// Activities returns the set of the kinds given.
func Activities(kinds ...ActivityKind) ActivitySet {
	var s ActivitySet
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in the set.
func (s ActivitySet) Has(k ActivityKind) bool { return s&(1<<k) != 0 }

// Activity is one thing that happened in an app. Which fields are set depends on Kind (see
// the kinds). Data aliases no buffer of the server: an observer may keep it.
type Activity struct {
	Kind     ActivityKind
	App      string
	Time     time.Time
	Channel  string
	Event    string
	Data     string
	SocketID string
	UserID   string
	Origin   string
	Count    int
	Code     int
}

// ActivityObserver hears an app's activity. The server asks Wants before it builds an Activity,
// so the kinds nobody wants cost one atomic load and a branch. Observe is called on the
// server's own goroutines, sometimes under its locks: it must return at once (queue or drop,
// never block) and must not call back into the server.
type ActivityObserver interface {
	Wants() ActivitySet
	Observe(a *Activity)
}
