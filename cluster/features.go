package cluster

import (
	"sort"
	"strconv"
)

// Feature is a wire feature a node reads, announced in its state stream (its node record):
// a node uses a feature only while every live node announces it, so that nodes of different
// releases share a bus while a cluster is upgraded node by node. The values are on the wire:
// a bit, once given, keeps its meaning and is never reused.
type Feature uint64

const (
	// FeatureBundles: the node reads herald.BusBundle messages (bundle.go).
	FeatureBundles Feature = 1 << iota
	// FeatureKeys: the node reads keyed messages (broker wire version 5) and delivers an
	// event of a key it received within the key window once (received.go).
	FeatureKeys
)

// featuresRead are the wire features this release reads.
const featuresRead = FeatureBundles | FeatureKeys

// featureNames names each feature, for health and logs.
var featureNames = []struct {
	f    Feature
	name string
}{{FeatureBundles, "bundles"}, {FeatureKeys, "keys"}}

// Names lists the features of f by name; an unknown bit (a later release's) as "bit<n>".
func (f Feature) Names() []string {
	names := []string{}
	for i := 0; i < 64; i++ {
		bit := Feature(1) << i
		if f&bit == 0 {
			continue
		}
		name := "bit" + strconv.Itoa(i)
		for _, n := range featureNames {
			if n.f == bit {
				name = n.name
			}
		}
		names = append(names, name)
	}
	return names
}

// NodeInfo is a node of the cluster as this one knows it from its state stream.
type NodeInfo struct {
	ID   string // its node id on the bus ("" for this node: the bus names it)
	Self bool   // this node
	// Release is the herald version the node runs ("" for v0.1.0, which does not say).
	Release string
	// StateVersion is the version of its state stream: 1 for v0.1.0.
	StateVersion int
	// Features are the wire features it reads.
	Features Feature
}

// Nodes lists this node and the live nodes it hears, this node first, then by id.
func (r *Replicated) Nodes() []NodeInfo {
	self := NodeInfo{Self: true, Release: r.cfg.Release, StateVersion: stateVersion, Features: r.stream.reads()}
	out := append([]NodeInfo{self}, r.stream.nodes()...)
	sort.Slice(out[1:], func(i, j int) bool { return out[1+i].ID < out[1+j].ID })
	return out
}

// Features are the wire features in use: those this node and every live node it hears read.
func (r *Replicated) Features() Feature { return r.stream.features() }

// ClusterStats are a replicated node's counters of its wire versions and features.
type ClusterStats struct {
	// BundlesSent counts the bundles this node published, BundledEvents the events in them.
	BundlesSent, BundledEvents uint64
	// BundlesReceived counts the bundles received and read into their events.
	BundlesReceived uint64
	// StateRefused counts the state stream batches refused because their version is one this
	// node does not know; BadBundles the bundles that did not decode.
	StateRefused, BadBundles uint64
	// Behind says this node is behind now (its fan-out queues stay full), BehindNodes how
	// many live nodes it hears announce so; BehindRefused counts the publishes it refused
	// meanwhile (503).
	Behind        bool
	BehindNodes   int
	BehindRefused uint64
}

// Stats returns the node's ClusterStats.
func (r *Replicated) Stats() ClusterStats {
	return ClusterStats{BundlesSent: r.bundles.sent.Load(), BundledEvents: r.bundles.events.Load(),
		BundlesReceived: r.bundles.received.Load(), StateRefused: r.stream.refused(), BadBundles: r.bundles.bad.Load(),
		Behind: r.press.behind.Load(), BehindNodes: r.stream.behindCount(), BehindRefused: r.press.refused.Load()}
}
