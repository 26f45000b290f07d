package statetest

import (
	"fmt"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
)

// featured is a State that uses wire features once every node reads them (cluster.Replicated).
type featured interface {
	Features() cluster.Feature
	Stats() cluster.ClusterStats
}

// testBundlesAcrossNodes: once every node reads bundles, a batch's consecutive events of one
// channel travel as one bundle, and reach the subscribers of every node in order, the batch's
// events of other channels in their places.
func testBundlesAcrossNodes(t *testing.T, nc NewCluster) {
	nodes := start(t, nc, 2)
	f, ok := nodes[0].st.(featured)
	if !ok {
		t.Skip("a State without wire features")
	}
	poll.Until(t, Wait, "bundles in use", func() (bool, string) {
		return f.Features()&cluster.FeatureBundles != 0, fmt.Sprint(f.Features().Names())
	})
	var cls []*client
	for _, nd := range nodes {
		cl := nd.connect()
		nd.subscribe(t, cl, "burst")
		nd.subscribe(t, cl, "side")
		cls = append(cls, cl)
	}
	var evs []herald.Event
	var frames [][]byte
	var want []string
	for i := range 8 {
		ch := "burst"
		if i == 3 {
			ch = "side"
		}
		evs = append(evs, herald.Event{Name: "e", Channel: ch})
		frames = append(frames, fmt.Appendf(nil, "b:%s-%d\n", ch, i))
		want = append(want, fmt.Sprintf("b:%s-%d", ch, i))
	}
	if err := nodes[0].st.PublishBatch(nodes[0].app, evs, frames); err != nil {
		t.Fatal(err)
	}
	for _, cl := range cls {
		cl.expect(t, "the batch, in order", "b:", want...)
	}
	if st := f.Stats(); st.BundlesSent != 2 || st.BundledEvents != 7 {
		t.Fatalf("stats %+v, want 2 bundles of 7 events", st)
	}
}
