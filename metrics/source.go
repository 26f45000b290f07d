package metrics

import "time"

// Source is what the collector reads at each scrape: the counters of a node's connections
// and channels, which the server keeps (cmd/herald adapts it).
type Source interface {
	// AppCounters returns each app's counters on this node.
	AppCounters() []AppCounters
	// NodeStats returns the node's counters, all apps together.
	NodeStats() NodeStats
}

// AppCounters are one app's counters on this node. Counters only grow; Connections,
// Channels, Subscriptions, CacheBytes and CacheEntries are current values.
type AppCounters struct {
	AppID               string
	Connections         int64 // connected
	NewConnections      int64 // new_connections_total
	Disconnections      int64 // new_disconnections_total
	MessagesSent        int64 // ws_messages_sent_total
	BytesSent           int64 // socket_transmitted_bytes
	Writes              int64 // socket_writes_total
	MessagesReceived    int64 // ws_messages_received_total
	BytesReceived       int64 // socket_received_bytes
	SlowConsumers       int64 // slow_consumer_disconnections_total
	ClientEventsLimited int64 // client_events_rate_limited_total
	SubscribesLimited   int64 // subscriptions_rate_limited_total
	Channels            int64 // channels
	Subscriptions       int64 // subscriptions
	CacheBytes          int64 // cache_bytes
	CacheEntries        int64 // cache_entries
	CacheEvictions      int64 // cache_evictions_total
	HistoryBytes        int64 // history_bytes
	HistoryEntries      int64 // history_entries
	HistoryEvictions    int64 // history_evictions_total
	ReplayedBytes       int64 // replayed_bytes_total
	ReplayPages         int64 // replay_pages_total
}

// NodeStats are a node's counters, all apps together.
type NodeStats struct {
	Connections    int64           // node_connections
	MaxConnections int             // max_connections
	Channels       int64           // node_channels
	PongTimeouts   int64           // pong_timeouts_total
	PongsUnread    int64           // pongs_unread_total
	Refusing       bool            // memory_guard_refusing: the memory guard refuses new connections
	Refused        []Refusal       // refused_connections_total, one series per reason
	QueueDepths    []int           // fanout_queue_depth: commands waiting in each fan-out worker's queue
	WriteDelays    []time.Duration // fanout_write_delay_seconds: each worker's write delay now
	Recoveries     []Outcome       // recoveries_total: recovery requests, one series per outcome
	GapsRepaired   int64           // history_gaps_repaired_total
	GapsLost       int64           // history_gaps_lost_total
	Rollbacks      int64           // history_rollbacks_total
	EpochsLost     int64           // history_epochs_lost_total
	Duplicates     int64           // history_duplicates_total
	HistoryLoads   int64           // history_loads_total
	// The node's idempotency keys (cluster.KeyStats): idempotency_keys, idempotency_repeats_total,
	// idempotency_waits_total, idempotency_evictions_total, idempotency_conflicts_total.
	Keys          KeyStats
	ReplayRefused []Refusal // replay_refusals_total: recoveries the replay budget refused, one series per level
	Missed        int64     // bus_missed_channels_total
}

// KeyStats are the node's counters of idempotency keys.
type KeyStats struct {
	Held                                         int
	Repeats, Waits, Evicted, Conflicts, Received uint64
}

// Outcome is how many recovery requests had one outcome.
type Outcome struct {
	Outcome string // recovered, or the reason it failed: too_old, epoch_changed, ...
	Count   int64
}

// Refusal is how many connections were refused at the handshake for one reason.
type Refusal struct {
	Reason string // the reason label: app_not_found, draining, origin, ...
	Count  int64
}
