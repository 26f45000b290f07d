package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-rt/herald"
)

// BusSource is what the bus collector reads at each scrape; every herald.Broker implements it.
// A source that also has InvalidFrames() uint64 (the event frames from the bus its node
// refused) has it exported too.
type BusSource interface {
	Stats() herald.BrokerStats
}

// invalidFrames is the optional part of a BusSource.
type invalidFrames interface{ InvalidFrames() uint64 }

// busShards is the optional part of a BusSource whose bus has several shards (Redis past
// one server): how many there are and how many are connected now.
type busShards interface{ ShardsConnected() (connected, total int) }

// BusRoundTrip registers <prefix>bus_round_trip_seconds and returns its observer, for the
// RoundTrip of a broker's config. Call it once, on clustered nodes only.
func (r *Registry) BusRoundTrip(prefix string) herald.BusObserver {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: prefix + "bus_round_trip_seconds",
		Help: "Round trips to the cluster bus: subscription confirmations, pipelines the bus replies to, periodic probes.",
		// 50 µs (loopback) to 5 s (a bus about to be declared lost).
		Buckets: prometheus.ExponentialBucketsRange(50e-6, 5, 18),
	})
	r.reg.MustRegister(h)
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}

// AttachBus exports the counters of a node's cluster bus under prefix, read from src.Stats at
// each scrape. Call it once, on clustered nodes only.
func (r *Registry) AttachBus(prefix string, src BusSource) {
	r.reg.MustRegister(newBusCollector(prefix, src))
}

// busCollector turns one BrokerStats, read once per scrape, into metrics.
type busCollector struct {
	src                                   BusSource
	connected, interests                  *prometheus.Desc
	sent, sentBytes, received, recvBytes  *prometheus.Desc
	publishErrors, dropped, reconnections *prometheus.Desc
	forged, replayed, invalid             *prometheus.Desc
	shards, shardsUp                      *prometheus.Desc
	unknownVersion                        *prometheus.Desc
}

func newBusCollector(prefix string, src BusSource) *busCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(prefix+name, help, nil, nil) }
	return &busCollector{
		src:            src,
		connected:      d("bus_connected", "1 while the cluster bus is reachable."),
		interests:      d("bus_interests", "(app, channel) pairs this node is subscribed to on the bus now."),
		sent:           d("bus_messages_sent_total", "Messages handed to the cluster bus."),
		sentBytes:      d("bus_bytes_sent_total", "Encoded bytes of the messages handed to the cluster bus."),
		received:       d("bus_messages_received_total", "Messages received from other nodes through the bus."),
		recvBytes:      d("bus_bytes_received_total", "Encoded bytes of the messages received from other nodes."),
		publishErrors:  d("bus_publish_errors_total", "Publishes to the bus that failed, and accepted messages the bus refused."),
		dropped:        d("bus_dropped_total", "Received bus messages dropped: the receive queue was full, or the message undecodable."),
		reconnections:  d("bus_reconnects_total", "Times the connection to the bus came back after a loss."),
		forged:         d("bus_forged_total", "Received bus messages and stored history events refused: not sealed with the cluster secret (unauthenticated, altered or forged)."),
		replayed:       d("bus_replayed_total", "Received bus messages refused: sealed with the cluster secret, but received before or sent too long ago."),
		unknownVersion: d("bus_unknown_version_total", "Received bus messages refused unread: an envelope version this node does not know (a later release's)."),
		invalid:        d("bus_invalid_frames_total", "Event frames from the bus or its history store refused: not one well-formed text frame."),
		shards:         d("bus_shards", "Connections of a bus with several (Redis shards, or a Redis Cluster's channel groups); absent otherwise."),
		shardsUp:       d("bus_shards_connected", "Of bus_shards, those connected now: the channels of the others fail until they come back."),
	}
}

// Describe implements prometheus.Collector.
func (c *busCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.interests, c.sent, c.sentBytes, c.received, c.recvBytes,
		c.publishErrors, c.dropped, c.reconnections, c.forged, c.replayed, c.invalid, c.unknownVersion, c.shards, c.shardsUp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *busCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	up := 0.0
	if st.Connected {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.interests, prometheus.GaugeValue, float64(st.Interests))
	counter(c.sent, st.MessagesSent)
	counter(c.sentBytes, st.BytesSent)
	counter(c.received, st.MessagesReceived)
	counter(c.recvBytes, st.BytesReceived)
	counter(c.publishErrors, st.PublishErrors)
	counter(c.dropped, st.Dropped)
	counter(c.forged, st.Forged)
	counter(c.replayed, st.Replayed)
	counter(c.unknownVersion, st.UnknownVersion)
	var invalid uint64
	if f, ok := c.src.(invalidFrames); ok {
		invalid = f.InvalidFrames()
	}
	counter(c.invalid, invalid)
	counter(c.reconnections, st.Reconnects)
	if s, ok := c.src.(busShards); ok {
		if up, total := s.ShardsConnected(); total > 0 {
			ch <- prometheus.MustNewConstMetric(c.shards, prometheus.GaugeValue, float64(total))
			ch <- prometheus.MustNewConstMetric(c.shardsUp, prometheus.GaugeValue, float64(up))
		}
	}
}
