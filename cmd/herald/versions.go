package main

import (
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/metrics"
)

// nodes lists the cluster's nodes with their releases, state stream versions and wire
// features, this node first (named by its own id), and the features in use: for /health.
// Nil before the node's State is built.
func (c *busLink) nodes() ([]httpapi.ClusterNode, []string) {
	r := c.rep.Load()
	if r == nil {
		return nil, nil
	}
	var out []httpapi.ClusterNode
	for _, n := range r.Nodes() {
		id := n.ID
		if n.Self {
			id = c.nodeID
		}
		out = append(out, httpapi.ClusterNode{NodeID: id, Self: n.Self, Release: n.Release, StateVersion: n.StateVersion,
			Features: n.Features.Names()})
	}
	return out, r.Features().Names()
}

// versions is what the metrics export of the cluster's versions and features.
func (c *busLink) versions() metrics.ClusterVersions {
	r := c.rep.Load()
	if r == nil {
		return metrics.ClusterVersions{}
	}
	st := r.Stats()
	v := metrics.ClusterVersions{InUse: r.Features().Names(), BundlesSent: st.BundlesSent, BundledEvents: st.BundledEvents,
		BundlesReceived: st.BundlesReceived, StateRefused: st.StateRefused, Behind: st.Behind, BehindNodes: st.BehindNodes, BehindRefused: st.BehindRefused}
	for _, n := range r.Nodes() {
		v.Nodes = append(v.Nodes, metrics.NodeVersion{Release: n.Release, StateVersion: n.StateVersion, Features: n.Features.Names()})
	}
	return v
}
