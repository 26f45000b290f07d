package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// Churn: churnWorkers raw clients, each joining churnRate/churnWorkers presence channels a
// second, for churnFor, spread over the nodes.
const (
	churnWorkers  = 20
	churnRate     = 500 // joins a second, all workers together
	churnFor      = 30 * time.Second
	churnChannels = 10
	churnUsers    = 40
	churnHold     = 3  // channels a connection holds at once; joining one more leaves the oldest
	churnConnLife = 20 // joins a connection makes before it goes away without a word
)

// TestClusterStateChurn runs three nodes, on each engine, under clients that join and leave
// presence channels at about 500 joins a second for 30 s, spread over the nodes, as users
// who also have connections on other nodes; a watcher on each node stays in one of the
// channels throughout. Then every client leaves: every node's REST must show no occupied
// channel but the watchers' (and that one with the watchers only), and each watcher's
// client, having applied every member_added and member_removed it got, must hold the
// watchers only, with no event one too many. Once the watchers leave too, no node lists a
// channel.
func TestClusterStateChurn(t *testing.T) {
	eachEngine(t, func(t *testing.T, c *stateCluster) {
		nodes := c.startN(t, "node-a", "node-b", "node-c")
		channel := func(i int) string { return fmt.Sprintf("presence-churn-%d", i) }
		var watchers []*peer
		var watcherIDs []string
		for _, n := range nodes {
			w := connectPeer(t, n, restApp, "watch-"+n.name)
			w.join(t, channel(0))
			watchers = append(watchers, w)
			watcherIDs = append(watcherIDs, w.user)
			waitOccupancy(t, nodes, restApp, channel(0), occupancy{len(watchers), slices.Sorted(slices.Values(watcherIDs))})
		}
		watcherIDs = slices.Sorted(slices.Values(watcherIDs))

		var joins, conns atomic.Int64
		var slowest atomic.Int64 // nanoseconds, the longest wait for a subscription_succeeded
		stop := time.Now().Add(churnFor)
		errs := make(chan error, churnWorkers)
		var wg sync.WaitGroup
		start := time.Now()
		for w := range churnWorkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- churn(nodes, w, stop, channel, &joins, &conns, &slowest)
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%s: %d joins in %v (%.0f a second) on %d connections; the slowest subscription_succeeded took %v",
			c.engine, joins.Load(), elapsed.Round(time.Millisecond), float64(joins.Load())/elapsed.Seconds(), conns.Load(),
			time.Duration(slowest.Load()).Round(time.Millisecond))

		left := time.Now()
		waitOccupancy(t, nodes, restApp, channel(0), occupancy{len(watchers), watcherIDs})
		for i := 1; i < churnChannels; i++ {
			waitOccupancy(t, nodes, restApp, channel(i), occupancy{0, []string{}})
		}
		poll.NoError(t, clusterWait, "every node to list only the watchers' channel", func() error {
			for _, n := range nodes {
				var list struct {
					Channels map[string]map[string]int `json:"channels"`
				}
				if err := n.restJSON(restApp, "GET", "/apps/"+restApp.ID+"/channels", nil, nil, &list); err != nil {
					return err
				}
				if _, ok := list.Channels[channel(0)]; !ok || len(list.Channels) != 1 {
					return fmt.Errorf("%s lists %v", n.name, list.Channels)
				}
			}
			return nil
		})
		t.Logf("%s: every node's counts right %v after the last client left", c.engine, time.Since(left).Round(time.Millisecond))
		for _, n := range nodes {
			marker(t, n, channel(0), watchers...)
		}
		for _, w := range watchers {
			wantView(t, w, channel(0), watcherIDs...)
		}

		// The watchers leave too: no node has an occupied channel left.
		for _, w := range watchers {
			w.close()
		}
		waitOccupancy(t, nodes, restApp, channel(0), occupancy{0, []string{}})
		poll.NoError(t, clusterWait, "every node to list no channel", func() error {
			for _, n := range nodes {
				var list struct {
					Channels map[string]map[string]int `json:"channels"`
				}
				if err := n.restJSON(restApp, "GET", "/apps/"+restApp.ID+"/channels", nil, nil, &list); err != nil {
					return err
				}
				if len(list.Channels) != 0 {
					return fmt.Errorf("%s lists %v", n.name, list.Channels)
				}
			}
			return nil
		})
	})
}

// churn is one worker of TestClusterStateChurn: until stop it connects to the nodes in
// turn, joins presence channels at its share of churnRate, holding churnHold at a time, and
// after churnConnLife joins closes the connection without unsubscribing. It returns the first
// thing that went wrong.
func churn(nodes []*node, w int, stop time.Time, channel func(int) string, joins, conns, slowest *atomic.Int64) error {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	tick := time.NewTicker(time.Second * churnWorkers / churnRate)
	defer tick.Stop()
	for i := 0; time.Now().Before(stop); i++ {
		n := nodes[(w+i)%len(nodes)]
		c, err := wstest.Dial(n.api, "/app/"+restApp.Key+"?protocol=7")
		if err != nil {
			return fmt.Errorf("worker %d: dial %s: %w", w, n.name, err)
		}
		conns.Add(1)
		err = churnConn(c, rng, tick, stop, channel, joins, slowest)
		c.Close()
		if err != nil {
			return fmt.Errorf("worker %d on %s: %w", w, n.name, err)
		}
	}
	return nil
}

func churnConn(c *wstest.Client, rng *rand.Rand, tick *time.Ticker, stop time.Time, channel func(int) string, joins, slowest *atomic.Int64) error {
	sid, err := c.SocketID(clusterWait)
	if err != nil {
		return err
	}
	user := fmt.Sprint("user-", rng.IntN(churnUsers))
	data := `{"user_id":"` + user + `","user_info":{"name":"` + user + `"}}`
	var held []string
	for range churnConnLife {
		<-tick.C
		if time.Now().After(stop) {
			return nil
		}
		if len(held) == churnHold {
			if err := c.WriteJSON(map[string]any{"event": "pusher:unsubscribe", "data": map[string]string{"channel": held[0]}}); err != nil {
				return err
			}
			held = held[1:]
		}
		ch := channel(rng.IntN(churnChannels))
		for slices.Contains(held, ch) {
			ch = channel(rng.IntN(churnChannels))
		}
		sent := time.Now()
		if err := c.Subscribe(ch, restApp.Key+":"+pusher.Sign(restApp.Secret, sid+":"+ch+":"+data), data); err != nil {
			return err
		}
		for {
			m, err := c.Read(clusterWait)
			if err != nil {
				return fmt.Errorf("waiting for subscription_succeeded on %s: %w", ch, err)
			}
			if m.Close != 0 {
				return fmt.Errorf("closed with %d", m.Close)
			}
			if m.Event == "pusher:subscription_error" || m.Event == "pusher:error" {
				return fmt.Errorf("%s: %s", m.Event, m.DataString())
			}
			if m.Event == "pusher_internal:subscription_succeeded" && m.Channel == ch {
				break
			}
		}
		took := int64(time.Since(sent))
		for s := slowest.Load(); took > s && !slowest.CompareAndSwap(s, took); s = slowest.Load() {
		}
		joins.Add(1)
		held = append(held, ch)
	}
	return nil
}
