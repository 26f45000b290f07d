package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-rt/herald/hub"
	"github.com/herald-rt/herald/metrics"
)

// hubMetrics is the hub as metrics reads it at each scrape.
type hubMetrics struct{ h *hub.Hub }

var _ metrics.Source = hubMetrics{}

// AppCounters implements metrics.Source.
func (m hubMetrics) AppCounters() []metrics.AppCounters {
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
			MessagesReceived:    a.MessagesReceived,
			BytesReceived:       a.BytesReceived,
			SlowConsumers:       a.SlowConsumers,
			ClientEventsLimited: a.ClientEventsLimited,
			Channels:            a.Channels,
			Subscriptions:       a.Subscriptions,
			CacheBytes:          a.CacheBytes,
			CacheEntries:        a.CacheEntries,
			CacheEvictions:      a.CacheEvictions,
		}
	}
	return out
}

// NodeStats implements metrics.Source: refusals are named by hub.Refusal.
func (m hubMetrics) NodeStats() metrics.NodeStats {
	st := m.h.Stats()
	refusals := m.h.Refusals()
	refused := make([]metrics.Refusal, len(refusals))
	for i, n := range refusals {
		refused[i] = metrics.Refusal{Reason: hub.Refusal(i).String(), Count: n}
	}
	return metrics.NodeStats{
		Connections:    st.Connections,
		MaxConnections: st.MaxConnections,
		Channels:       st.Channels,
		PongTimeouts:   st.PongTimeouts,
		Refusing:       st.Refusing,
		Refused:        refused,
		QueueDepths:    m.h.QueueDepths(),
	}
}

// hubObservers hands a registry's observers of each app (PublishLatency, IngestLatency) to
// the hub's Config.
func hubObservers(of func(appID string) prometheus.Observer) func(appID string) hub.Observer {
	return func(appID string) hub.Observer { return of(appID) }
}
