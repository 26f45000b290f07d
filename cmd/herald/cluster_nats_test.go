package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
)

// TestNATSClusterKill runs three `herald serve` nodes on a cluster of three NATS servers, each
// node given the three URLs with a different one first (so each is on its own server), a
// subscriber on every node and a steady load of 50 REST publishes a second spread over the
// nodes. The NATS server of node-a is killed (-9): node-a is on another server within 5 s
// (its reconnections counter and its log say so), and every event published a second after
// that reaches the subscriber on every node. The reconnection gap and the longest pause in
// node-a's subscriber's deliveries are logged (docs/benchmarks.md records them).
func TestNATSClusterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three nats-servers and three herald nodes")
	}
	bus := servicetest.NATSClusterJetStream(t, 3)
	var nodes []*node
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		n := startNode(t, name, bus.URL(i))
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "nats", true) })
		if !strings.Contains(n.logs.String(), `"server":"`+bus.Name(i)+`"`) {
			t.Fatalf("%s is not on %s:\n%s", name, bus.Name(i), n.logs.String())
		}
		nodes = append(nodes, n)
	}
	a := nodes[0]
	var (
		mu   sync.Mutex
		got  = map[*node][]delivery{}
		subs []*subscriber
	)
	for _, n := range nodes {
		subs = append(subs, subscribe(t, n, "news"))
	}
	for _, s := range subs {
		deliver(t, nodes[1], s, "news") // every node's interest is on every server
	}
	for i, n := range nodes {
		s := subs[i]
		go func() { // drains s until its connection closes (at cleanup)
			for m := range s.msgs {
				if seq, err := strconv.Atoi(strings.TrimPrefix(m.DataString(), "seq ")); err == nil && m.Event == "tick" {
					mu.Lock()
					got[n] = append(got[n], delivery{seq, time.Now()})
					mu.Unlock()
				}
			}
		}()
	}

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
	waitBackOnAnotherServer(t, a, nodes, &mu, got, after, last)
	mu.Lock()
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

// lastLine returns the last line of logs that holds s.
func lastLine(logs, s string) string {
	var out string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, s) {
			out = line
		}
	}
	return out
}

// delivery is an event a subscriber of the NATS kill tests received: its seq, and when.
type delivery struct {
	seq int
	at  time.Time
}

// waitBackOnAnotherServer checks that node a, whose NATS server was killed, is connected
// again, to another server than n1, and that every event from seq after to last (published a
// second after it was back) reached every node's subscriber (got, under mu).
func waitBackOnAnotherServer(t *testing.T, a *node, nodes []*node, mu *sync.Mutex, got map[*node][]delivery, after, last int) {
	t.Helper()
	a.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "nats", true) })
	if !strings.Contains(a.logs.String(), "cluster bus reconnected") || strings.Contains(lastLine(a.logs.String(), "cluster bus reconnected"), `"server":"n1"`) {
		t.Errorf("node-a's log does not say it reconnected to another server:\n%s", a.logs.String())
	}
	for _, n := range nodes {
		poll.NoError(t, clusterWait, n.name+"'s subscriber to receive every event from "+strconv.Itoa(after), func() error {
			mu.Lock()
			defer mu.Unlock()
			seen := map[int]bool{}
			for _, d := range got[n] {
				seen[d.seq] = true
			}
			for seq := after; seq <= last; seq++ {
				if !seen[seq] {
					return fmt.Errorf("seq %d not received", seq)
				}
			}
			return nil
		})
	}
}
