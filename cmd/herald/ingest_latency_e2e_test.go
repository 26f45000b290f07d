package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
)

// TestIngestLatencyAcrossNodes runs two `herald serve` nodes on a Redis bus, both reading
// one Redis stream in one consumer group, with a subscriber on each. Entries are added with
// ids 2 s in the past (a stream entry's time is its id's): whichever node consumes an entry,
// each node observes, in herald_ingest_latency_seconds{app_id}, 2 s or more from the
// entry's time to its own frames queued, the time having crossed the bus with the event.
func TestIngestLatencyAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-server and herald nodes")
	}
	rs, c, cfgPath := redisIngest(t, "")
	nodes := []*node{startNode(t, "node-a", rs.URL(), "--config", cfgPath), startNode(t, "node-b", rs.URL(), "--config", cfgPath)}
	var subs []*tradeSub
	for _, n := range nodes {
		waitIngestUp(t, n, "the source up")
		subs = append(subs, watchTrades(t, n, "auction-1"))
	}
	const entries = 6
	past := time.Now().Add(-2 * time.Second).UnixMilli()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	for i := range entries {
		id := fmt.Sprintf("%d-%d", past, i)
		if err := c.Do(ctx, c.B().Xadd().Key("bids").Id(id).FieldValue().FieldValue("item_id", "1").FieldValue("seq", strconv.Itoa(i)).Build()).Error(); err != nil {
			t.Fatalf("XADD %s: %v", id, err)
		}
	}
	for _, s := range subs {
		s.waitAll(t, entries)
	}
	handedOff := 0.0
	for _, n := range nodes {
		var count, sum float64
		poll.NoError(t, clusterWait, n.name+": every entry in herald_ingest_latency_seconds", func() error {
			var ok bool
			count, ok = scrape(t, n, `herald_ingest_latency_seconds_count{app_id="app-id"}`)
			if !ok || count < entries {
				return fmt.Errorf("count %v (present %v)", count, ok)
			}
			return nil
		})
		sum, _ = scrape(t, n, `herald_ingest_latency_seconds_sum{app_id="app-id"}`)
		under := bucketsBelow(t, n, `herald_ingest_latency_seconds_bucket{app_id="app-id",`, 2)
		if count != entries || under != 0 || sum < 2*entries || sum > 60*entries {
			t.Errorf("%s: %v observations, %v in buckets under 2 s, sum %.3f s; want %d, all at least 2 s", n.name, count, under, sum, entries)
		}
		h, _ := scrape(t, n, `herald_ingest_handoff_seconds_count{source="bids"}`)
		t.Logf("%s: %v entries observed, mean %.3f s from the entry's time to frames queued; %v consumed here", n.name, count, sum/count, h)
		handedOff += h
	}
	if handedOff != entries {
		t.Errorf("herald_ingest_handoff_seconds counted %v entries over both nodes, want %d (each consumed once)", handedOff, entries)
	}
}

// bucketsBelow returns the largest count of the histogram buckets whose series start with
// prefix and whose bound is under limit: how many observations were under that bound.
func bucketsBelow(t *testing.T, n *node, prefix string, limit float64) float64 {
	t.Helper()
	resp, err := n.client.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	most, seen := 0.0, 0
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(prefix)+`le="([^"]+)"\} (\S+)$`).FindAllSubmatch(body, -1) {
		le, _ := strconv.ParseFloat(string(m[1]), 64)
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		if le < limit {
			seen++
			most = max(most, v)
		}
	}
	if seen == 0 {
		t.Fatalf("%s: no bucket of %s under %v", n.name, prefix, limit)
	}
	return most
}

// scrape returns the value of one sample of n's metrics, and whether it is there.
func scrape(t *testing.T, n *node, sample string) (float64, bool) {
	t.Helper()
	resp, err := n.client.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v, true
}
