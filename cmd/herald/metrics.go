package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
)

// nodeMetrics is the node's server as metrics reads it at each scrape.
type nodeMetrics struct{ h *session.Server }

var _ metrics.Source = nodeMetrics{}

// AppCounters implements metrics.Source.
func (m nodeMetrics) AppCounters() []metrics.AppCounters {
	apps := m.h.AppMetrics()
	out := make([]metrics.AppCounters, len(apps))
	for i, a := range apps {
		out[i] = metrics.AppCounters{
			AppID:               a.AppID,
			Connections:         a.Connections,
			NewConnections:      a.NewConnections,
			Disconnections:      a.Disconnections,
			MessagesSent:        a.MessagesSent,
			BytesSent:           a.BytesSent,
			Writes:              a.Writes,
			MessagesReceived:    a.MessagesReceived,
			BytesReceived:       a.BytesReceived,
			SlowConsumers:       a.SlowConsumers,
			ClientEventsLimited: a.ClientEventsLimited,
			SubscribesLimited:   a.SubscribesLimited,
			Channels:            a.Channels,
			Subscriptions:       a.Subscriptions,
			CacheBytes:          a.CacheBytes,
			CacheEntries:        a.CacheEntries,
			CacheEvictions:      a.CacheEvictions,
			HistoryBytes:        a.HistoryBytes,
			HistoryEntries:      a.HistoryEntries,
			HistoryEvictions:    a.HistoryEvictions,
			ReplayedBytes:       a.ReplayedBytes,
			ReplayPages:         a.ReplayPages,
		}
	}
	return out
}

// NodeStats implements metrics.Source: refusals are named by session.Refusal.
func (m nodeMetrics) NodeStats() metrics.NodeStats {
	st := m.h.Stats()
	refusals := m.h.Refusals()
	refused := make([]metrics.Refusal, len(refusals))
	for i, n := range refusals {
		refused[i] = metrics.Refusal{Reason: session.Refusal(i).String(), Count: n}
	}
	rec := m.h.Recoveries()
	outcomes := make([]metrics.Outcome, len(rec))
	for i, n := range rec {
		outcomes[i] = metrics.Outcome{Outcome: session.RecoveryReasons[i], Count: n}
	}
	repaired, lost, dups := m.h.HistoryStats()
	rollbacks, epochsLost := m.h.RollbackStats()
	var budget []metrics.Refusal
	for i, n := range m.h.ReplayRefusals() {
		budget = append(budget, metrics.Refusal{Reason: session.ReplayBudgetLevels[i], Count: n})
	}
	return metrics.NodeStats{
		HistoryLoads:   m.h.HistoryLoads(),
		Keys:           keyStats(m.h.KeyStats()),
		ReplayRefused:  budget,
		Recoveries:     outcomes,
		GapsRepaired:   repaired,
		GapsLost:       lost,
		Rollbacks:      rollbacks,
		EpochsLost:     epochsLost,
		Duplicates:     dups,
		Missed:         m.h.MissedChannels(),
		Connections:    st.Connections,
		MaxConnections: st.MaxConnections,
		Channels:       st.Channels,
		PongTimeouts:   st.PongTimeouts,
		PongsUnread:    st.PongsUnread,
		Refusing:       st.Refusing,
		Refused:        refused,
		QueueDepths:    m.h.QueueDepths(),
		WriteDelays:    m.h.WriteDelays(),
	}
}

// observers hands a registry's observers of each app (PublishLatency, IngestLatency) to the
// server's Config.
func observers(of func(appID string) prometheus.Observer) func(appID string) fanout.Observer {
	return func(appID string) fanout.Observer { return of(appID) }
}

// keyStats are the metrics' view of the node's idempotency keys.
func keyStats(k cluster.KeyStats) metrics.KeyStats {
	return metrics.KeyStats{Held: k.Held, Repeats: k.Repeats, Waits: k.Waits, Evicted: k.Evicted, Conflicts: k.Conflict, Received: k.Received}
}
