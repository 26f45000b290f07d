package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestNATSClusterState runs three `herald serve` nodes on a cluster of three NATS servers,
// each node on its own server, with presence members on every node, a counted channel, a
// Redis-stream ingest source delivering into a channel with a subscriber on every node, and
// the webhooks of the Redis topology test. Before and after a kill -9 of node-a's server:
// /channels and /channels/{presence}/users agree on every node; no member still connected is
// reported gone (REST, frames, webhooks) while node-a moves to another server; a join and a
// leave after it are seen everywhere; each channel_occupied, channel_vacated, member_added
// and member_removed webhook is posted once for the cluster; ingest delivers every entry to
// the nodes whose server lives, those node-a's source handed off to its server just before
// the kill included (it hands them off again once on another server: ingest.Reconnector),
// and, from 200 entries after node-a is back, to node-a.
func TestNATSClusterState(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs three nats-servers, a redis-server and three herald nodes")
	}
	natsClusterState(t)
}

func natsClusterState(t *testing.T) {
	bus := servicetest.NATSClusterJetStream(t, 3)
	hooks := newHookReceiver(t, map[string]string{restApp.Key: restApp.Secret})
	_, rc, cfgPath := redisIngest(t, "      claim_idle: 1s\n")
	ingestCfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	app := fmt.Sprintf("apps:\n  - {id: %s, key: %s, secret: %s, enable_client_messages: true, webhooks: [{url: '%s', "+
		"event_types: [channel_occupied, channel_vacated, member_added, member_removed]}]}\n", restApp.ID, restApp.Key, restApp.Secret, hooks.srv.URL)
	if err := os.WriteFile(cfgPath, append(ingestCfg, app...), 0o600); err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		n := startNode(t, name, bus.URL(i), "--config", cfgPath, "--cluster-heartbeat", stateHeartbeat.String(),
			"--cluster-node-timeout", stateNodeTimeout.String(), "--webhooks-leave-delay", "0", "--webhooks-batch-interval", "20ms")
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "nats", true) })
		if !strings.Contains(n.logs.String(), `"server":"`+bus.Name(i)+`"`) {
			t.Fatalf("%s is not on %s:\n%s", name, bus.Name(i), n.logs.String())
		}
		waitIngestUp(t, n, "the source up")
		nodes = append(nodes, n)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]

	// Presence: one member per node, each joined once the others agree on the one before.
	const room = "presence-room"
	users := joinInTurn(t, nodes, room)
	u1, u2, u3 := users[0], users[1], users[2]
	subscribeInTurn(t, nodes, "counted", a, b, c, c)
	waitOccupancy(t, nodes, restApp, "counted", occupancy{subs: 4})

	// Ingest: entries added without pause, read by the three nodes in one consumer group.
	var trades []*tradeSub
	for _, n := range nodes {
		trades = append(trades, watchTrades(t, n, "auction-1"))
		waitOccupancy(t, nodes, restApp, "auction-1", occupancy{subs: len(trades)})
	}
	var mu sync.Mutex
	seq := 0
	stop := keepProducing(func() {
		mu.Lock()
		defer mu.Unlock()
		cmds := make(rueidis.Commands, 0, 5)
		for range 5 {
			cmds = append(cmds, rc.B().Xadd().Key("bids").Id("*").FieldValue().FieldValue("item_id", "1").FieldValue("seq", strconv.Itoa(seq)).Build())
			seq++
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
		defer cancel()
		for _, r := range rc.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				t.Errorf("XADD: %v", err)
			}
		}
	})
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	added := func() int { mu.Lock(); defer mu.Unlock(); return seq }
	for _, s := range trades {
		s.waitAll(t, 300)
	}

	// The kill: node-a's server.
	atKill := added() // entries added before the kill
	killed := time.Now()
	bus.Servers[0].Stop(t)
	var back time.Time
	poll.NoError(t, clusterWait, "node-a to reconnect", func() error {
		if v, err := a.metric("bus_reconnects_total"); err != nil || v < 1 {
			return fmt.Errorf("bus_reconnects_total %v (%v)", v, err)
		}
		back = time.Now()
		return nil
	})
	fromSeq := added() // the first entry added once node-a was back
	a.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "nats", true) })
	if strings.Contains(lastLine(a.logs.String(), "cluster bus reconnected"), `"server":"n1"`) {
		t.Errorf("node-a's log does not say it reconnected to another server:\n%s", a.logs.String())
	}
	// No member still connected is gone from any node, for node_timeout + 2 heartbeats.
	want := occupancy{3, []string{"u1", "u2", "u3"}}
	agreed := time.Duration(-1) // since node-a was back, when every node first agreed
	wrong := 0
	for time.Since(killed) < stateNodeTimeout+2*stateHeartbeat {
		var errs []error
		for _, n := range nodes {
			for ch, w := range map[string]occupancy{room: want, "counted": {subs: 4}, "auction-1": {subs: 3}} {
				if err := n.checkOccupancy(restApp, ch, w); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if errs == nil && agreed < 0 {
			agreed = max(0, time.Since(back))
		}
		if errs != nil && wrong < 5 {
			wrong++
			t.Errorf("%v after the kill: %v", time.Since(killed).Round(time.Millisecond), errs)
		}
		time.Sleep(100 * time.Millisecond) // the pace of checking that nothing changes
	}
	if agreed < 0 || agreed > stateNodeTimeout+stateHeartbeat {
		t.Errorf("the nodes agreed %v after node-a was back; want within node_timeout + heartbeat", agreed)
	}

	// A join on node-a and a leave on node-b after the kill are seen everywhere.
	u4 := connectPeer(t, a, restApp, "u4")
	u4.join(t, room)
	u2.close()
	want = occupancy{3, []string{"u1", "u3", "u4"}}
	took := waitOccupancy(t, nodes, restApp, room, want)
	u1.wait(t, "member_removed u2", memberEvent("member_removed", room, "u2"))
	u3.wait(t, "member_added u4", memberEvent("member_added", room, "u4"))

	// Ingest: every entry reaches every node's subscriber, but node-a's, which may miss what
	// node-b and node-c published while it was between servers (at most once, see
	// docs/cluster.md): from 100 entries before the kill to 200 (about 250 ms here) after
	// node-a was back. node-b and node-c miss nothing: what node-a's source had handed off
	// to its server just before the kill, which that server may not have passed on, node-a
	// hands off again once on another server.
	poll.Until(t, clusterWait, "400 entries added after node-a was back", func() (bool, string) {
		return added() >= fromSeq+400, strconv.Itoa(added())
	})
	stop()
	stopped = true
	total := added()
	for i, s := range trades {
		n := nodes[i]
		poll.NoError(t, 2*clusterWait, n.name+"'s subscriber to get the entries outside the kill's window", func() error {
			lost := s.missing(0, total)
			for _, q := range lost {
				if q < atKill-100 || q >= fromSeq+200 || n != a {
					return fmt.Errorf("%s missed %d of %d entries: %s (%d added before the kill, %d before node-a was back; node-a missed %s)",
						n.name, len(lost), total, summarize(lost), atKill, fromSeq, summarize(trades[0].missing(0, total)))
				}
			}
			return nil
		})
	}
	resumed := -1
	for _, q := range trades[0].snapshot() {
		if q >= fromSeq {
			resumed = q
			break
		}
	}
	marker(t, a, room, u1, u3, u4)
	marker(t, c, room, u1, u3, u4)
	wantMembers(t, u1, room, once("u2", "u3", "u4"), once("u2"))
	wantMembers(t, u3, room, once("u4"), once("u2"))
	wantMembers(t, u4, room, none(), once("u2")) // u4 joined before u2 left
	for _, p := range []*peer{u1, u3, u4} {
		wantView(t, p, room, want.users...)
	}
	u1.close()
	u3.close()
	u4.close()
	waitOccupancy(t, nodes, restApp, room, occupancy{0, []string{}})

	// Webhooks: once for the cluster; none for the channels that stayed occupied.
	key := restApp.Key + " " + room + " "
	poll.Until(t, clusterWait, "the room's webhooks", func() (bool, string) {
		return hooks.count(key+"channel_vacated") > 0 && hooks.count(key+"member_removed") >= 4, strings.Join(hooks.all(), "\n")
	})
	subscribe(t, b, "marker") // late duplicates would come before the marker's webhook
	poll.Until(t, clusterWait, "the marker's channel_occupied", func() (bool, string) {
		return hooks.count(restApp.Key+" marker channel_occupied") > 0, ""
	})
	for e, n := range map[string]int{
		key + "channel_occupied": 1, key + "channel_vacated": 1, key + "member_added": 4, key + "member_removed": 4,
		restApp.Key + " counted channel_occupied": 1, restApp.Key + " counted channel_vacated": 0,
		restApp.Key + " auction-1 channel_occupied": 1, restApp.Key + " auction-1 channel_vacated": 0,
	} {
		if got := hooks.count(e); got != n {
			t.Errorf("%s posted %d times, want %d:\n%s", e, got, n, strings.Join(hooks.all(), "\n"))
		}
	}
	t.Logf("kill -9 of node-a's NATS server: node-a reconnected %v later; counts and members right on every node at the first check %v after it was back "+
		"(never wrong in between); a join and a leave after it agreed on every node in %v; ingest: %d entries, "+
		"missed by node-a %v, node-b %v, node-c %v; received twice by node-a %d, node-b %d, node-c %d; node-a's source handed off again %s events; "+
		"first entry added after the reconnection (seq %d) got seq %d; %d webhooks posted",
		back.Sub(killed).Round(time.Millisecond), agreed.Round(time.Millisecond), took.Round(time.Millisecond), total,
		summarize(trades[0].missing(0, total)), summarize(trades[1].missing(0, total)), summarize(trades[2].missing(0, total)),
		trades[0].twice(), trades[1].twice(), trades[2].twice(), resentEvents(a.logs.String()), fromSeq, resumed, len(hooks.all()))
}

// snapshot is the seqs received so far, in order.
func (s *tradeSub) snapshot() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seqs)
}

// twice is how many seqs were received more than once.
func (s *tradeSub) twice() int {
	seen := map[int]bool{}
	n := 0
	for _, q := range s.snapshot() {
		if seen[q] {
			n++
		}
		seen[q] = true
	}
	return n
}

// resentEvents is the "events" of each log line of an ingest source handing off again
// what a lost bus connection may have lost, "none" without one.
func resentEvents(logs string) string {
	var out []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "handing off again") {
			_, v, _ := strings.Cut(line, `"events":`)
			out = append(out, strings.TrimRight(strings.TrimSpace(v), "}"))
		}
	}
	if out == nil {
		return "none"
	}
	return strings.Join(out, ", ")
}

// missing is the seqs in [from, to) not received.
func (s *tradeSub) missing(from, to int) []int {
	seen := map[int]bool{}
	for _, q := range s.snapshot() {
		seen[q] = true
	}
	var out []int
	for q := from; q < to; q++ {
		if !seen[q] {
			out = append(out, q)
		}
	}
	return out
}

// summarize is seqs as ranges: "12-15 20", or "none".
func summarize(seqs []int) string {
	if len(seqs) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(seqs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, " ")
}
