package metrics

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterVersions is what a clustered node knows of the cluster's wire versions and features,
// read at each scrape (cluster.Replicated's Nodes, Features and Stats).
type ClusterVersions struct {
	Nodes []NodeVersion // this node and the live nodes it hears
	InUse []string      // the wire features every live node reads, in use now
	// BundlesSent, BundledEvents and BundlesReceived count bundles (several events of one
	// channel in one bus message); StateRefused the state batches of an unknown version.
	BundlesSent, BundledEvents, BundlesReceived, StateRefused uint64
	// Behind says this node is behind (its fan-out queues stay full); BehindNodes counts the
	// other live nodes that say so; BehindRefused the publishes refused meanwhile.
	Behind        bool
	BehindNodes   int
	BehindRefused uint64
}

// NodeVersion is one node of ClusterVersions.
type NodeVersion struct {
	Release      string   // "" for a node that does not say (v0.1.0)
	StateVersion int      // its state stream's version
	Features     []string // the wire features it reads
}

// AttachClusterVersions exports, under prefix, the cluster's nodes by release and wire
// version, the features in use and the bundles' counters, read from src at each scrape. Call
// it once, on clustered nodes only.
func (r *Registry) AttachClusterVersions(prefix string, src func() ClusterVersions) {
	r.reg.MustRegister(&versionCollector{src: src,
		nodes: prometheus.NewDesc(prefix+"cluster_nodes", "Live nodes of the cluster (this one included) by release, state stream version and the wire features they read.",
			[]string{"release", "state_version", "features"}, nil),
		inUse: prometheus.NewDesc(prefix+"cluster_feature_in_use", "1 for each wire feature that every live node reads, and so is used.", []string{"feature"}, nil),
		sent:  prometheus.NewDesc(prefix+"bus_bundles_sent_total", "Bundles published: several events of one channel in one bus message.", nil, nil),
		evs:   prometheus.NewDesc(prefix+"bus_bundled_events_total", "Events published in bundles.", nil, nil),
		recv:  prometheus.NewDesc(prefix+"bus_bundles_received_total", "Bundles received and read into their events.", nil, nil),
		refused: prometheus.NewDesc(prefix+"cluster_state_refused_total",
			"State stream batches refused: a state stream version this node does not know (a later release's).", nil, nil),
		behind:      prometheus.NewDesc(prefix+"cluster_behind", "1 while this node cannot keep up with the events it receives (its fan-out queues stay full): the cluster refuses new publishes.", nil, nil),
		behindNodes: prometheus.NewDesc(prefix+"cluster_behind_nodes", "Other live nodes that announce they cannot keep up: this node refuses new publishes while there is one.", nil, nil),
		behindRefused: prometheus.NewDesc(prefix+"publish_refused_behind_total",
			"Publishes this node refused (503, Retry-After) because a node of the cluster could not keep up.", nil, nil),
	})
}

type versionCollector struct {
	src                                    func() ClusterVersions
	nodes, inUse, sent, evs, recv, refused *prometheus.Desc
	behind, behindNodes, behindRefused     *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *versionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.nodes, c.inUse, c.sent, c.evs, c.recv, c.refused, c.behind, c.behindNodes, c.behindRefused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *versionCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.src()
	type key struct{ release, version, features string }
	count := map[key]int{}
	for _, n := range v.Nodes {
		count[key{n.Release, strconv.Itoa(n.StateVersion), strings.Join(n.Features, ",")}]++
	}
	for k, n := range count {
		ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(n), k.release, k.version, k.features)
	}
	for _, f := range v.InUse {
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, 1, f)
	}
	counter := func(d *prometheus.Desc, n uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n))
	}
	counter(c.sent, v.BundlesSent)
	counter(c.evs, v.BundledEvents)
	counter(c.recv, v.BundlesReceived)
	counter(c.refused, v.StateRefused)
	counter(c.behindRefused, v.BehindRefused)
	behind := 0.0
	if v.Behind {
		behind = 1
	}
	ch <- prometheus.MustNewConstMetric(c.behind, prometheus.GaugeValue, behind)
	ch <- prometheus.MustNewConstMetric(c.behindNodes, prometheus.GaugeValue, float64(v.BehindNodes))
}
