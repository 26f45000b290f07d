package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestNATSClusterKillHistory is TestNATSClusterKill with a history channel published
// alongside (streams of one replica): every event acknowledged (200) on it must reach every
// subscriber, or the subscriber be closed with 4200 (to recover). The publishes of the
// history channel whose stream was on the killed server wait their 1 s deadline each, so
// the run takes about 4 minutes: longer than a silent client may stay connected by
// default (activity_timeout 120 s, then pong_timeout 30 s for a pusher:ping these test
// clients do not answer, then 4201), so the nodes' activity_timeout is 10 minutes here. It
// runs only with HERALD_NATS_CLUSTER_HISTORY_E2E=1, for its length.
func TestNATSClusterKillHistory(t *testing.T) {
	if testing.Short() || os.Getenv("HERALD_NATS_CLUSTER_HISTORY_E2E") != "1" {
		t.Skip("takes about 4 minutes; HERALD_NATS_CLUSTER_HISTORY_E2E=1 runs it")
	}
	bus := servicetest.NATSClusterJetStream(t, 3)
	config := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(config, []byte(historyKillConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		n := startNode(t, name, bus.URL(i), "--config", config)
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "nats", true) })
		if !strings.Contains(n.logs.String(), `"server":"`+bus.Name(i)+`"`) {
			t.Fatalf("%s is not on %s:\n%s", name, bus.Name(i), n.logs.String())
		}
		nodes = append(nodes, n)
	}
	a := nodes[0]
	var (
		mu     sync.Mutex
		got    = map[*node][]delivery{}
		hist   = map[*node]map[int]bool{} // history-news events received
		closed = map[*node]int{}          // the close code of history-news's subscriber
		nclose = map[*node]int{}          // the close code of news's subscriber
		subs   []*subscriber
		hsubs  []*subscriber
	)
	for _, n := range nodes {
		subs = append(subs, subscribe(t, n, "news"))
		hsubs = append(hsubs, subscribe(t, n, "history-news"))
		hist[n] = map[int]bool{}
	}
	for _, s := range subs {
		deliver(t, nodes[1], s, "news") // every node's interest is on every server
	}
	for i, n := range nodes {
		s, h := subs[i], hsubs[i]
		go func() { // drains s until its connection closes (at cleanup)
			for m := range s.msgs {
				mu.Lock()
				if seq, err := strconv.Atoi(strings.TrimPrefix(m.DataString(), "seq ")); err == nil && m.Event == "tick" {
					got[n] = append(got[n], delivery{seq, time.Now()})
				}
				if m.Close != 0 && nclose[n] == 0 {
					nclose[n] = m.Close
				}
				mu.Unlock()
			}
		}()
		go func() {
			for m := range h.msgs {
				mu.Lock()
				if seq, err := strconv.Atoi(strings.TrimPrefix(m.DataString(), "seq ")); err == nil && m.Event == "tick" {
					hist[n][seq] = true
				}
				if m.Close != 0 && closed[n] == 0 {
					closed[n] = m.Close
				}
				mu.Unlock()
			}
		}()
	}
	acked := map[int]bool{} // history-news events published with 200
	hrefused := 0

	const rate = 50 // publishes a second
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	var (
		killed, back time.Time
		backSeq      = -1 // the first seq published once node-a was back
		refused      int
		last         int
	)
	for seq := 0; backSeq < 0 || seq < backSeq+3*rate; seq++ {
		<-tick.C
		n := nodes[seq%len(nodes)]
		status, header, body := n.publish(t, "news", "seq "+strconv.Itoa(seq))
		switch {
		case status == http.StatusOK:
		case n == a && status == http.StatusServiceUnavailable && header.Get("Retry-After") != "" && backSeq < 0:
			refused++ // node-a without its bus
		default:
			t.Fatalf("%s: publish %d: %d %s", n.name, seq, status, body)
		}
		switch status, _, body := n.publish(t, "history-news", "seq "+strconv.Itoa(seq)); status {
		case http.StatusOK:
			acked[seq] = true
		case http.StatusServiceUnavailable: // the stream's server lost, or node-a without its bus
			hrefused++
		default:
			t.Fatalf("%s: history publish %d: %d %s", n.name, seq, status, body)
		}
		last = seq
		if seq == 2*rate {
			killed = time.Now()
			bus.Servers[0].Stop(t) // kill -9 of node-a's server
		}
		if !killed.IsZero() && backSeq < 0 {
			if v, err := a.metric("bus_reconnects_total"); err == nil && v >= 1 {
				back, backSeq = time.Now(), seq+1
			} else if time.Since(killed) > clusterWait {
				t.Fatalf("node-a not reconnected %v after its server was killed", clusterWait)
			}
		}
	}
	gap := back.Sub(killed)
	after := backSeq + rate
	mu.Lock()
	if len(nclose) > 0 {
		t.Errorf("news subscribers closed (node: code): %v", nclose)
	}
	mu.Unlock()
	waitBackOnAnotherServer(t, a, nodes, &mu, got, after, last)
	// On the history channel nothing is lost silently: every acknowledged event reaches
	// every subscriber, or the subscriber is closed (4200, to recover).
	for _, n := range nodes {
		poll.NoError(t, clusterWait, n.name+"'s history-news subscriber to receive every acknowledged event or be closed", func() error {
			mu.Lock()
			defer mu.Unlock()
			if c := closed[n]; c != 0 {
				if c != 4200 {
					return fmt.Errorf("closed with %d, want 4200", c)
				}
				return nil
			}
			for seq := range acked {
				if !hist[n][seq] {
					return fmt.Errorf("acknowledged event %d not received", seq)
				}
			}
			return nil
		})
	}
	mu.Lock()
	t.Logf("history-news: %d events acknowledged, %d refused (503); subscribers closed with 4200: %v", len(acked), hrefused, closed)
	var pause time.Duration
	for i := 1; i < len(got[a]); i++ {
		if d := got[a][i].at.Sub(got[a][i-1].at); got[a][i].at.After(killed) && d > pause {
			pause = d
		}
	}
	lost := map[string]int{}
	for _, n := range nodes {
		seen := map[int]bool{}
		for _, d := range got[n] {
			seen[d.seq] = true
		}
		for seq := 0; seq <= last; seq++ {
			if !seen[seq] && !(seq%len(nodes) == 0 && seq > 2*rate && seq < backSeq) {
				lost[n.name]++
			}
		}
	}
	mu.Unlock()
	t.Logf("kill -9 of node-a's NATS server: node-a reconnected (to another server) %v later; longest pause in node-a's subscriber's deliveries after the kill %v; node-a refused %d publishes meanwhile; events not delivered (at most once) per node: %v",
		gap.Round(time.Millisecond), pause.Round(time.Millisecond), refused, lost)
	if gap > 5*time.Second {
		t.Errorf("node-a reconnected %v after its server was killed; want within 5 s", gap)
	}
	for _, n := range nodes {
		if err := n.stop(); err != nil {
			t.Errorf("%s: %v", n.name, err)
		}
	}
}

// historyKillConfig is the development app with history-news a history channel, and an
// activity_timeout longer than the run.
const historyKillConfig = `activity_timeout: 10m
apps:
  - id: app-id
    key: app-key
    secret: app-secret
    history:
      - {channels: "history-*", size: 10000, ttl: 10m}
`
