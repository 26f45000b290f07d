package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector turns a Source's counters into metrics at scrape time.
type collector struct {
	src  Source
	http *HTTP

	connected, newConns, disconnects                                  *prometheus.Desc
	sent, received, sentBytes, receivedBytes, writes                  *prometheus.Desc
	httpCalls, httpReceived, httpTransmitted                          *prometheus.Desc
	slow, eventsLimited, channels, subs                               *prometheus.Desc
	subsLimited                                                       *prometheus.Desc
	refused, queueDepth, writeDelay, pongTimeouts, pongsUnread        *prometheus.Desc
	capacity, refusing, nodeConns, nodeChans                          *prometheus.Desc
	cacheBytes, cacheEntries, cacheEvictions                          *prometheus.Desc
	histBytes, histEntries, histEvictions                             *prometheus.Desc
	recoveries, gapsRepaired, gapsLost, dups, missed                  *prometheus.Desc
	rollbacks, epochsLost                                             *prometheus.Desc
	replayed, replayPages, replayRefused, histLoads                   *prometheus.Desc
	keys, keyRepeats, keyWaits, keyEvicted, keyConflicts, keyReceived *prometheus.Desc
}

func newCollector(prefix string, src Source, http *HTTP) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, help, labels, nil)
	}
	app := "app_id"
	return &collector{
		src:  src,
		http: http,

		connected:     d("connected", "WebSocket connections open now.", app),
		newConns:      d("new_connections_total", "WebSocket connections accepted.", app),
		disconnects:   d("new_disconnections_total", "WebSocket connections closed, for any reason.", app),
		sent:          d("ws_messages_sent_total", "WebSocket messages queued to clients.", app),
		received:      d("ws_messages_received_total", "WebSocket messages received from clients (data and control).", app),
		sentBytes:     d("socket_transmitted_bytes", "Bytes written to WebSocket connections.", app),
		writes:        d("socket_writes_total", "Write calls to WebSocket connections, each of one or more messages: ws_messages_sent_total over it is the messages per write.", app),
		receivedBytes: d("socket_received_bytes", "Payload bytes of the WebSocket messages received.", app),

		httpCalls:       d("http_calls_received_total", "REST API calls received.", app),
		httpReceived:    d("http_received_bytes", "REST API request body bytes received.", app),
		httpTransmitted: d("http_transmitted_bytes", "REST API response body bytes sent.", app),

		slow:          d("slow_consumer_disconnections_total", "Connections closed with 4100 because their outbound queue passed its bound.", app),
		eventsLimited: d("client_events_rate_limited_total", "Client events rejected with 4301 for passing the per-connection rate.", app),
		subsLimited:   d("subscriptions_rate_limited_total", "Subscriptions refused with 4301 for passing the per-connection rate.", app),
		channels:      d("channels", "Occupied channels now.", app),
		subs:          d("subscriptions", "Channel subscriptions now.", app),

		cacheBytes:     d("cache_bytes", "Bytes held by the last events of cache channels (frames, names, bookkeeping), bounded by cache.max_bytes_per_app.", app),
		cacheEntries:   d("cache_entries", "Cache channels holding a last event.", app),
		cacheEvictions: d("cache_evictions_total", "Last events of cache channels evicted to stay within cache.max_bytes_per_app or cache.max_bytes (TTL expiries not counted).", app),

		histBytes:     d("history_bytes", "Bytes held by the events history channels keep on this node (a cluster node: its copies), bounded by history.max_bytes_per_app.", app),
		histEntries:   d("history_entries", "Events history channels keep on this node.", app),
		histEvictions: d("history_evictions_total", "Kept events forgotten to stay within history.max_bytes_per_app (size and TTL not counted).", app),
		recoveries:    d("recoveries_total", "Recovery requests by outcome: recovered, or the reason they failed.", "outcome"),
		gapsRepaired:  d("history_gaps_repaired_total", "Gaps in a history channel's offsets that the bus left on this node, repaired from the history."),
		gapsLost:      d("history_gaps_lost_total", "Gaps whose events were gone from the history: the channel's subscribers here were closed with 4200."),
		rollbacks:     d("history_rollbacks_total", "Times this node found the cluster's history store gone back within an epoch (acknowledged events lost, as in a power cut) and ended the epoch."),
		epochsLost:    d("history_epochs_lost_total", "New history epochs this node's copies took while their subscribers had positions of the old one: those subscribers were closed with 4200 and are told epoch_changed."),
		dups:          d("history_duplicates_total", "Events of history channels the bus brought twice, dropped."),
		replayed:      d("replayed_bytes_total", "History replayed to recovering clients, in bytes (the events and their position frames).", app),
		replayPages:   d("replay_pages_total", "Pages of history replayed to recovering clients: each at most a quarter of outbound_buffer_bytes, sent once the previous one has drained.", app),
		replayRefused: d("replay_refusals_total", "Recoveries answered recovered:false, reason rate_limited, by the level of the replay budget in debt: connection, address, app or node.", "budget"),
		keys:          d("idempotency_keys", "Idempotency keys this node remembers now (publish.idempotency_window)."),
		keyRepeats:    d("idempotency_repeats_total", "Events this node did not publish again: a publish of their idempotency key had succeeded within the window."),
		keyWaits:      d("idempotency_waits_total", "Publishes that waited for another publish of their idempotency key in flight on this node."),
		keyEvicted:    d("idempotency_evictions_total", "Idempotency keys forgotten before their window ended, past publish.idempotency_max_keys."),
		keyReceived:   d("idempotency_received_repeats_total", "Events of channels without history that this cluster node received again from the bus with a key it had received within the window, and did not deliver again."),
		keyConflicts:  d("idempotency_conflicts_total", "Publishes refused (503) because another of their idempotency key stayed in flight past the publish timeout."),
		histLoads:     d("history_loads_total", "Histories a cluster node read whole from the bus's store into its copy (a channel's first local subscriber, or the first after its copy stopped lingering)."),
		missed:        d("bus_missed_channels_total", "Channels without history whose events this node dropped from the bus (it could not keep up): their subscribers here were closed with 4100."),

		refused:      d("refused_connections_total", "Connections refused at the handshake, by reason.", "reason"),
		queueDepth:   d("fanout_queue_depth", "Commands waiting in each fan-out worker's queue.", "worker"),
		writeDelay:   d("fanout_write_delay_seconds", "How long each fan-out worker holds frames for a connection it wrote very recently, now (write_delay): 0 while it is not busy.", "worker"),
		pongTimeouts: d("pong_timeouts_total", "Connections closed with 4201 for not answering a ping."),
		pongsUnread:  d("pongs_unread_total", "Pong timeouts that passed while the client's bytes waited in the kernel, unread by this node: the connection was kept."),
		capacity:     d("max_connections", "Connections this node accepts: the configured limit capped by the open-file limit."),
		refusing:     d("memory_guard_refusing", "1 while the memory guard refuses new connections."),
		nodeConns:    d("node_connections", "WebSocket connections open on this node, all apps."),
		nodeChans:    d("node_channels", "Occupied channels on this node, all apps."),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.newConns, c.disconnects, c.sent, c.received, c.sentBytes, c.writes, c.writeDelay,
		c.receivedBytes, c.httpCalls, c.httpReceived, c.httpTransmitted, c.slow, c.eventsLimited, c.subsLimited, c.channels, c.subs,
		c.refused, c.queueDepth, c.pongTimeouts, c.pongsUnread, c.capacity, c.refusing, c.nodeConns, c.nodeChans,
		c.cacheBytes, c.cacheEntries, c.cacheEvictions, c.histBytes, c.histEntries, c.histEvictions,
		c.recoveries, c.gapsRepaired, c.gapsLost, c.rollbacks, c.epochsLost, c.dups, c.missed, c.replayed, c.replayPages, c.replayRefused, c.histLoads,
		c.keys, c.keyRepeats, c.keyWaits, c.keyEvicted, c.keyConflicts, c.keyReceived} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, m := range c.src.AppCounters() {
		gauge(c.connected, float64(m.Connections), m.AppID)
		counter(c.newConns, m.NewConnections, m.AppID)
		counter(c.disconnects, m.Disconnections, m.AppID)
		counter(c.sent, m.MessagesSent, m.AppID)
		counter(c.received, m.MessagesReceived, m.AppID)
		counter(c.sentBytes, m.BytesSent, m.AppID)
		counter(c.writes, m.Writes, m.AppID)
		counter(c.receivedBytes, m.BytesReceived, m.AppID)
		counter(c.slow, m.SlowConsumers, m.AppID)
		counter(c.eventsLimited, m.ClientEventsLimited, m.AppID)
		counter(c.subsLimited, m.SubscribesLimited, m.AppID)
		gauge(c.channels, float64(m.Channels), m.AppID)
		gauge(c.subs, float64(m.Subscriptions), m.AppID)
		gauge(c.cacheBytes, float64(m.CacheBytes), m.AppID)
		gauge(c.cacheEntries, float64(m.CacheEntries), m.AppID)
		counter(c.cacheEvictions, m.CacheEvictions, m.AppID)
		gauge(c.histBytes, float64(m.HistoryBytes), m.AppID)
		gauge(c.histEntries, float64(m.HistoryEntries), m.AppID)
		counter(c.histEvictions, m.HistoryEvictions, m.AppID)
		counter(c.replayed, m.ReplayedBytes, m.AppID)
		counter(c.replayPages, m.ReplayPages, m.AppID)
		if c.http != nil {
			if h := c.http.counters(m.AppID); h != nil {
				counter(c.httpCalls, h.calls.Load(), m.AppID)
				counter(c.httpReceived, h.received.Load(), m.AppID)
				counter(c.httpTransmitted, h.transmitted.Load(), m.AppID)
			}
		}
	}
	st := c.src.NodeStats()
	for _, r := range st.Refused {
		counter(c.refused, r.Count, r.Reason)
	}
	for i, n := range st.QueueDepths {
		gauge(c.queueDepth, float64(n), strconv.Itoa(i))
	}
	for i, d := range st.WriteDelays {
		gauge(c.writeDelay, d.Seconds(), strconv.Itoa(i))
	}
	for _, r := range st.Recoveries {
		counter(c.recoveries, r.Count, r.Outcome)
	}
	for _, r := range st.ReplayRefused {
		counter(c.replayRefused, r.Count, r.Reason)
	}
	counter(c.histLoads, st.HistoryLoads)
	gauge(c.keys, float64(st.Keys.Held))
	counter(c.keyRepeats, int64(st.Keys.Repeats))
	counter(c.keyWaits, int64(st.Keys.Waits))
	counter(c.keyEvicted, int64(st.Keys.Evicted))
	counter(c.keyConflicts, int64(st.Keys.Conflicts))
	counter(c.keyReceived, int64(st.Keys.Received))
	counter(c.gapsRepaired, st.GapsRepaired)
	counter(c.gapsLost, st.GapsLost)
	counter(c.rollbacks, st.Rollbacks)
	counter(c.epochsLost, st.EpochsLost)
	counter(c.dups, st.Duplicates)
	counter(c.missed, st.Missed)
	counter(c.pongTimeouts, st.PongTimeouts)
	counter(c.pongsUnread, st.PongsUnread)
	gauge(c.capacity, float64(st.MaxConnections))
	gauge(c.nodeConns, float64(st.Connections))
	gauge(c.nodeChans, float64(st.Channels))
	r := 0.0
	if st.Refusing {
		r = 1
	}
	gauge(c.refusing, r)
}
