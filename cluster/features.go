package cluster

import (
	"sort"
	"strconv"
	"time"

	"github.com/herald-rt/herald"
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
	s := r.stream
	out := []NodeInfo{{Self: true, Release: r.cfg.Release, StateVersion: stateVersion, Features: s.announced()}}
	s.mu.Lock()
	for id, p := range s.peers {
		out = append(out, NodeInfo{ID: id, Release: p.node.release, StateVersion: p.node.version, Features: p.node.features})
	}
	s.mu.Unlock()
	sort.Slice(out[1:], func(i, j int) bool { return out[1+i].ID < out[1+j].ID })
	return out
}

// Features are the wire features in use: those this node and every live node it hears read.
func (r *Replicated) Features() Feature { return Feature(r.stream.inUse.Load()) }

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
		BundlesReceived: r.bundles.received.Load(), StateRefused: r.stream.refused.Load(), BadBundles: r.bundles.bad.Load(),
		Behind: r.press.behind.Load(), BehindNodes: r.stream.behindCount(), BehindRefused: r.press.refused.Load()}
}

// announced is what this node announces it reads.
func (s *stream) announced() Feature {
	if s.legacy {
		return 0
	}
	return featuresRead
}

// nodeRecord is the record that ends each of this node's batches.
func (s *stream) nodeRecord() nodeRecord {
	return nodeRecord{version: stateVersion, features: s.announced(), release: s.r.cfg.Release, behind: s.r.press.behind.Load()}
}

// recountLocked sets the features in use: this node's, less what any live peer does not
// read; none until this node has had its bus for two heartbeats, by when every live node has
// been heard (each sends at least one batch a heartbeat), so that a node just started or back
// from an outage does not use a feature before it knows whether an older node is there. Call
// with s.mu held.
func (s *stream) recountLocked() {
	f := s.announced()
	if up := s.busUpSince.Load(); up == 0 || s.r.eng.Now()-up < 2*s.heartbeat.Milliseconds() {
		f = 0
	}
	behind, count := "", 0
	for name, p := range s.peers {
		f &= p.node.features
		if p.node.behind {
			count++
			if behind == "" || name < behind {
				behind = name
			}
		}
	}
	s.inUse.Store(uint64(f))
	s.behindNodes.Store(int32(count))
	if behind == "" {
		s.behindPeer.Store(nil)
	} else {
		s.behindPeer.Store(&behind)
	}
}

// behindCount is how many live nodes announce that they are behind.
func (s *stream) behindCount() int { return int(s.behindNodes.Load()) }

// recount is recountLocked, taking s.mu.
func (s *stream) recount() {
	s.mu.Lock()
	s.recountLocked()
	s.mu.Unlock()
}

// refuse counts and logs (rate-limited) a batch of a state stream version this node does
// not know.
func (s *stream) refuse(node string, version int) {
	n := s.refused.Add(1)
	if s.refusedLog.Due(s.r.eng.Now(), logEvery.Milliseconds()) {
		s.r.log.Warn("cluster: state stream batch of an unknown version refused: the node runs a later release",
			"node_id", node, "version", version, "refused_total", n)
	}
}

// watchVersions logs (rate-limited) the bus messages of an unknown envelope version the bus
// refused since the last call, naming the latest one's sender and version.
func (s *stream) watchVersions(st herald.BrokerStats) {
	if st.UnknownVersion == s.unknownSeen {
		return
	}
	if s.unknownLog.Due(s.r.eng.Now(), logEvery.Milliseconds()) {
		s.r.log.Warn("cluster: bus messages of an unknown wire version refused: a node runs a later release",
			"node_id", st.LastUnknownVersion.Node, "version", st.LastUnknownVersion.Version,
			"refused", st.UnknownVersion-s.unknownSeen, "refused_total", st.UnknownVersion)
		s.unknownSeen = st.UnknownVersion
	}
}

// logEvery is the interval of the warnings of unknown versions.
const logEvery = 30 * time.Second
