package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/rueidis"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestIngestRedisStreamNodes runs two `herald serve` nodes on a Redis bus, both reading one
// Redis stream in one consumer group (claim_idle 1s), while entries are added without pause:
// node-a is killed with SIGKILL; node-b claims the entries it left pending, and every entry
// reaches a subscriber on node-b (duplicates counted); node-a, started again under the same
// node id, reads again.
func TestIngestRedisStreamNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-server and herald nodes")
	}
	rs, c, cfgPath := redisIngest(t, "      claim_idle: 1s\n")
	a := startNode(t, "node-a", rs.URL(), "--config", cfgPath)
	b := startNode(t, "node-b", rs.URL(), "--config", cfgPath)
	for _, n := range []*node{a, b} {
		waitIngestUp(t, n, "the source up")
	}
	sub := watchTrades(t, b, "auction-1")

	var mu sync.Mutex
	seq := 0
	add := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		cmds := make(rueidis.Commands, 0, n)
		for range n {
			cmds = append(cmds, c.B().Xadd().Key("bids").Id("*").FieldValue().FieldValue("item_id", "1").FieldValue("seq", strconv.Itoa(seq)).Build())
			seq++
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
		defer cancel()
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Errorf("XADD: %v", err)
			}
		}
	}
	added := func() int { mu.Lock(); defer mu.Unlock(); return seq }
	stop := keepProducing(func() { add(5) })
	sub.waitAll(t, 300)
	a.kill(t)
	sub.waitAll(t, added()+100) // node-b alone, claiming what node-a left pending
	a = startNode(t, "node-a", rs.URL(), "--config", cfgPath)
	waitIngestUp(t, a, "the source up again")
	sub.waitAll(t, added()+200)
	stop()
	total := added()
	sub.waitAll(t, total)
	sub.mu.Lock()
	dups := len(sub.seqs) - total
	sub.mu.Unlock()
	t.Logf("auction-1 on node-b: %d entries added, all delivered, %d duplicates", total, dups)
	reclaimed := metric(t, b, `herald_ingest_reclaimed_total{source="bids"}`)
	t.Logf("node-b claimed %v entries left pending by node-a", reclaimed)
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	poll.NoError(t, clusterWait, "no entry pending", func() error {
		arr, err := c.Do(ctx, c.B().Xpending().Key("bids").Group("herald").Build()).ToArray()
		if err != nil {
			return err
		}
		if n, _ := arr[0].AsInt64(); n != 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
}

// TestIngestBrokersDownAtStart: a node whose Kafka and Redis sources are unreachable starts,
// serves its WebSocket clients and REST publishes, says why each source is down in the
// metrics listener's /health and source_up 0 in the metrics, and stops cleanly.
func TestIngestBrokersDownAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-server and a herald node")
	}
	bus := servicetest.Redis(t)
	cfgPath := writeFile(t, "herald.yaml", fmt.Sprintf(`
ingest:
  - name: trades
    app: app-id
    kafka: {brokers: ["127.0.0.1:%d"], topics: [trades], group: g}
    channel: "{value.symbol}.trade"
    event: trade
  - name: bids
    app: app-id
    redis: {url: "redis://127.0.0.1:%d/0", stream: bids, group: g}
    channel: "auction-{value.item_id}"
    event: bid
`, freePort(t), freePort(t)))
	n := startNode(t, "node-a", bus.URL(), "--config", cfgPath)
	poll.NoError(t, clusterWait, "both sources down with their error", func() error {
		resp, err := n.client.Get("http://" + n.metrics + "/health")
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var h struct {
			Status string
			Ingest []struct{ Name, State, Error string }
		}
		if err := json.Unmarshal(body, &h); err != nil {
			return err
		}
		if h.Status != "ok" || len(h.Ingest) != 2 {
			return fmt.Errorf("%s", body)
		}
		for _, s := range h.Ingest {
			if s.State != "down" || s.Error == "" {
				return fmt.Errorf("%s", body)
			}
		}
		return nil
	})
	sub := subscribe(t, n, "news")
	deliver(t, n, sub, "news")
	for _, src := range []string{"trades", "bids"} {
		if up := metric(t, n, `herald_ingest_source_up{source="`+src+`"}`); up != 0 {
			t.Errorf("%s: source_up %v while down", src, up)
		}
	}
	if err := n.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// redisIngest starts redis-server, a client of it, and a config file whose one source, bids,
// reads the stream bids into auction-{value.item_id} (event trade, data the entry's seq) in
// the consumer group herald; extra is more YAML lines of its redis block.
func redisIngest(t *testing.T, extra string) (*servicetest.Server, rueidis.Client, string) {
	t.Helper()
	rs := servicetest.Redis(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return rs, c, writeFile(t, "herald.yaml", `
ingest:
  - name: bids
    app: app-id
    redis:
      url: `+rs.URL()+`
      stream: bids
      group: herald
      start: earliest
`+extra+`    channel: "auction-{value.item_id}"
    event: trade
    data: "{value.seq}"
`)
}
