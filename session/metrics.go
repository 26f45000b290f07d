package session

// AppMetrics is one app's counters on this node. Counters only grow; Connections,
// Channels and Subscriptions are current values.
type AppMetrics struct {
	AppID               string
	Connections         int64
	NewConnections      int64
	Disconnections      int64
	MessagesSent        int64
	BytesSent           int64
	Writes              int64 // write calls to sockets
	MessagesReceived    int64
	BytesReceived       int64
	SlowConsumers       int64
	ClientEventsLimited int64
	SubscribesLimited   int64 // pusher:subscribe refused over max_subscriptions_per_second
	Channels            int64
	Subscriptions       int64
	CacheBytes          int64 // held by the last events of cache channels, see cluster.Config.CacheMaxBytesPerApp
	CacheEntries        int64
	CacheEvictions      int64 // last events dropped to stay within a bound (not TTL expiries)
	HistoryBytes        int64 // held by the events history channels keep here
	HistoryEntries      int64
	HistoryEvictions    int64 // kept events forgotten to stay within the app's bound
	ReplayedBytes       int64 // history replayed to recovering clients, in bytes
	ReplayPages         int64 // and in pages
}

// AppMetrics returns every app's counters, summed over workers.
func (s *Server) AppMetrics() []AppMetrics {
	var out []AppMetrics
	s.apps.Range(func(_, v any) bool {
		a := v.(*appState)
		f := a.st.Figures()
		m := AppMetrics{
			AppID:         a.id,
			Connections:   a.g.Conns(),
			Channels:      f.Channels,
			Subscriptions: f.Subscriptions,

			CacheBytes:     f.CacheBytes,
			CacheEntries:   f.CacheEntries,
			CacheEvictions: f.CacheEvictions,

			HistoryBytes:     f.HistoryBytes,
			HistoryEntries:   f.HistoryEntries,
			HistoryEvictions: f.HistoryEvictions,
		}
		cs := a.g.Counters()
		for i := range cs {
			c := &cs[i]
			m.NewConnections += c.Connects.Load()
			m.Disconnections += c.Disconnects.Load()
			m.MessagesSent += c.Sent.Load()
			m.BytesSent += c.SentBytes.Load()
			m.Writes += c.Writes.Load()
			m.MessagesReceived += c.Received.Load()
			m.BytesReceived += c.ReceivedBytes.Load()
			m.SlowConsumers += c.Slow.Load()
			m.ClientEventsLimited += c.EventsLimited.Load()
			m.SubscribesLimited += c.SubscribesLimited.Load()
			m.ReplayedBytes += c.ReplayedBytes.Load()
			m.ReplayPages += c.ReplayPages.Load()
		}
		out = append(out, m)
		return true
	})
	return out
}

// Refusal is why a connection was refused at the handshake.
type Refusal uint8

// Refusal reasons, the label values of herald_refused_connections_total.
const (
	RefusedAppNotFound Refusal = iota
	RefusedDraining
	RefusedOrigin
	RefusedIPRate
	RefusedMemory
	RefusedNodeFull
	RefusedAppFull
	RefusedAppDisabled  // the app is disabled (4003)
	RefusedAppStoreDown // an unknown key while the app store is unreachable (4100)
	refusalCount
)

var refusalNames = [refusalCount]string{"app_not_found", "draining", "origin", "ip_rate", "memory", "node_full", "app_full",
	"app_disabled", "app_store_down"}

// String is the reason's metric label.
func (r Refusal) String() string { return refusalNames[r] }

// Refusals returns how many connections were refused for each reason, indexed by Refusal.
func (s *Server) Refusals() []int64 {
	out := make([]int64, refusalCount)
	for i := range out {
		out[i] = s.refusals[i].Load()
	}
	return out
}
