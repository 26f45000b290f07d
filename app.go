package herald

// App is one tenant: the credentials its clients and servers sign with, its switches and its
// limits. An App is never mutated once an AppStore hands it out: a store whose apps change
// hands out a new App for each change.
type App struct {
	ID     string
	Key    string
	Secret string

	// Disabled switches the app off: its connections are refused and closed with 4003 and its
	// REST calls answered 403. The zero value is an enabled app.
	Disabled bool

	// EnableClientMessages allows client-* events on private and presence channels.
	EnableClientMessages bool
	// EnableUserAuthentication allows pusher:signin and #server-to-user-{id} channels.
	EnableUserAuthentication bool
	// EnableSubscriptionCountEvent sends pusher_internal:subscription_count to the subscribers
	// of every channel but presence ones when its subscription count changes (coalesced).
	EnableSubscriptionCountEvent bool

	// AllowedOrigins lists the browser origins that may connect ("https://app.example.com",
	// "*.example.com", "*"); empty allows every origin. See guard.ParseOrigins.
	AllowedOrigins []string

	// History lists the rules of the channels that keep their recent events (see
	// HistoryRule); the first rule that matches a channel is its rule.
	History []HistoryRule

	// Webhooks lists the URLs the app's events are posted to (package webhook sends them);
	// none: the app sends no webhooks.
	Webhooks []Webhook

	Limits Limits
}

// Webhook is one URL an app's events are posted to: the events named in EventTypes (empty:
// every event) of the channels Filter keeps, each request with Headers added.
type Webhook struct {
	URL        string
	EventTypes []string
	Filter     WebhookFilter
	Headers    map[string]string
}

// WebhookFilter keeps the events of the channels whose names start and end as given ("" =
// any).
type WebhookFilter struct {
	ChannelNameStartsWith string
	ChannelNameEndsWith   string
}

// Limits bound what one app may do. A zero field means "use the default" (see DefaultLimits).
type Limits struct {
	MaxConnections          int // per node; 0 = unlimited (close 4004 when over)
	MaxChannelNameLength    int // bytes, including prefix
	MaxEventNameLength      int
	MaxEventPayloadBytes    int // size of the data field of one event
	MaxChannelsPerEvent     int // channels in one REST trigger
	MaxBatchSize            int // events in one batch_events call
	MaxPresenceMembers      int // distinct users in one presence channel
	MaxPresenceMemberBytes  int // size of one member's user_info
	MaxPresenceUserIDLength int
	MaxChannelsPerConn      int // channels one connection may join
	// MaxClientEventsPerSecond is each connection's client-event rate (token bucket with a
	// burst of the same size); over it an event is rejected with 4301.
	MaxClientEventsPerSecond int
	// MaxSubscriptionsPerSecond is each connection's pusher:subscribe rate (token bucket with
	// a burst of MaxChannelsPerConn, or of the rate when larger, so that a client can join all
	// its channels at once on connecting); over it a subscription is refused with a
	// pusher:subscription_error of status 4301 and the connection stays open. Unsubscribing is
	// never limited: every leave needs a join first.
	MaxSubscriptionsPerSecond int
	// MaxAPIRequestsPerSecond is the app's REST request rate on this node (token bucket with a
	// burst of the same size); over it the API answers 429 with Retry-After. 0 = unlimited.
	MaxAPIRequestsPerSecond int
}

// DefaultLimits are the values used for every zero field of an app's Limits. They follow
// Pusher's documented limits where Pusher documents one.
var DefaultLimits = Limits{
	MaxConnections:          0,
	MaxChannelNameLength:    164,
	MaxEventNameLength:      200,
	MaxEventPayloadBytes:    10 * 1024,
	MaxChannelsPerEvent:     100,
	MaxBatchSize:            10,
	MaxPresenceMembers:      100,
	MaxPresenceMemberBytes:  1024,
	MaxPresenceUserIDLength: 128,
	MaxChannelsPerConn:      100,

	MaxClientEventsPerSecond:  10,
	MaxSubscriptionsPerSecond: 10,
	MaxAPIRequestsPerSecond:   0,
}

// WithDefaults returns l with every zero field replaced by its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	pick := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	return Limits{
		MaxConnections:          pick(l.MaxConnections, d.MaxConnections),
		MaxChannelNameLength:    pick(l.MaxChannelNameLength, d.MaxChannelNameLength),
		MaxEventNameLength:      pick(l.MaxEventNameLength, d.MaxEventNameLength),
		MaxEventPayloadBytes:    pick(l.MaxEventPayloadBytes, d.MaxEventPayloadBytes),
		MaxChannelsPerEvent:     pick(l.MaxChannelsPerEvent, d.MaxChannelsPerEvent),
		MaxBatchSize:            pick(l.MaxBatchSize, d.MaxBatchSize),
		MaxPresenceMembers:      pick(l.MaxPresenceMembers, d.MaxPresenceMembers),
		MaxPresenceMemberBytes:  pick(l.MaxPresenceMemberBytes, d.MaxPresenceMemberBytes),
		MaxPresenceUserIDLength: pick(l.MaxPresenceUserIDLength, d.MaxPresenceUserIDLength),
		MaxChannelsPerConn:      pick(l.MaxChannelsPerConn, d.MaxChannelsPerConn),

		MaxClientEventsPerSecond:  pick(l.MaxClientEventsPerSecond, d.MaxClientEventsPerSecond),
		MaxSubscriptionsPerSecond: pick(l.MaxSubscriptionsPerSecond, d.MaxSubscriptionsPerSecond),
		MaxAPIRequestsPerSecond:   pick(l.MaxAPIRequestsPerSecond, d.MaxAPIRequestsPerSecond),
	}
}

// AppStore finds apps by id or by key, and lists them. Implementations must be safe for
// concurrent use.
type AppStore interface {
	AppByID(id string) (*App, bool)
	AppByKey(key string) (*App, bool)
	// Apps lists every app, in no particular order.
	Apps() []*App
}

// AppChange is one app added, changed or removed in an AppStore whose apps change while herald
// runs (package appstore): Old is nil for an app added, New is nil for an app removed.
type AppChange struct {
	Old, New *App
}

// AppStoreStale is an optional ability of an AppStore that mirrors a service (a database):
// Stale reports whether the store has lost touch with it. While it has, an id or key the
// store does not know may belong to an app added meanwhile, so herald refuses it as
// unavailable (4100, HTTP 503) rather than as unknown (4001, HTTP 404).
type AppStoreStale interface {
	Stale() bool
}

// StaticApps is an AppStore over a fixed list, built once from configuration.
type StaticApps struct {
	byID  map[string]*App
	byKey map[string]*App
}

// NewStaticApps indexes apps by id and key. Limits are filled with defaults.
func NewStaticApps(apps []App) *StaticApps {
	s := &StaticApps{byID: map[string]*App{}, byKey: map[string]*App{}}
	for i := range apps {
		a := apps[i]
		a.Limits = a.Limits.WithDefaults()
		s.byID[a.ID] = &a
		s.byKey[a.Key] = &a
	}
	return s
}

// AppByID implements AppStore.
func (s *StaticApps) AppByID(id string) (*App, bool) { a, ok := s.byID[id]; return a, ok }

// AppByKey implements AppStore.
func (s *StaticApps) AppByKey(key string) (*App, bool) { a, ok := s.byKey[key]; return a, ok }

// Apps implements AppStore.
func (s *StaticApps) Apps() []*App {
	out := make([]*App, 0, len(s.byID))
	for _, a := range s.byID {
		out = append(out, a)
	}
	return out
}
