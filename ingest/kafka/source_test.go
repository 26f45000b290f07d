package kafka_test

import (
	"strconv"
	"testing"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/ingesttest"
	"github.com/herald-rt/herald/internal/servicetest"
)

// What every source promises (order, commits, backpressure, bad records, Close, states,
// outages) is ingesttest's suite, run by TestConformance; these tests are Kafka's own.

// TestRebalanceSharesAndHandsOver: two sources of one group (two nodes) share the
// partitions; when one closes, the other takes its partitions and every record is delivered.
func TestRebalanceSharesAndHandsOver(t *testing.T) {
	k := servicetest.SharedKafka(t)
	cl := admin(t, k)
	topic, group := unique(t, "topic"), unique(t, "group")
	createTopic(t, cl, topic, 4)
	a, b := &ingesttest.Sink{}, &ingesttest.Sink{}
	sa := start(t, k, a, topic, group)
	sb := start(t, k, b, topic, group)
	waitFor(t, "both sources up", func() bool { return sa.Stats().State == ingest.StateUp && sb.Stats().State == ingest.StateUp })
	seq := 0
	round := func() {
		for p := range int32(4) {
			produce(t, cl, topic, p, rec("p"+strconv.Itoa(int(p)), seq))
		}
		seq++
	}
	// Until both hold partitions (the group settles), every record reaches one of them.
	waitFor(t, "both sources consuming", func() bool {
		round()
		return len(a.Events()) > 0 && len(b.Events()) > 0
	})
	ingesttest.Stop(t, sb)
	for range 20 {
		round()
	}
	total := 4 * seq
	waitFor(t, "every record on the remaining node", func() bool {
		seen := map[string]bool{}
		for _, ev := range append(a.Events(), b.Events()...) {
			seen[ev.Channel+"/"+ev.Data] = true
		}
		return len(seen) == total
	})
	n := ingesttest.CheckOrder(t, a.Events()) // the remaining node's own events stay in order per partition
	for p := range 4 {
		if n["p"+strconv.Itoa(p)] == 0 {
			t.Errorf("the remaining node got nothing of partition %d", p)
		}
	}
}
