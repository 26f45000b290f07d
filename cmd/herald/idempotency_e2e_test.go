package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/pusher"
)

// publishKeyed publishes event "order" with data on channel through n with the idempotency
// key; err is a failure to get an answer (the node is gone, or slower than the client's
// timeout).
func (n *node) publishKeyed(channel, data, key string) (int, error) {
	path := "/apps/" + restApp.ID + "/events"
	body, _ := json.Marshal(map[string]string{"name": "order", "channel": channel, "data": data})
	q := pusher.SignRequest(restApp, "POST", path, nil, body, time.Now())
	req, err := http.NewRequest("POST", "http://"+n.api+path+"?"+q.Encode(), strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Idempotency-Key", key)
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestClusterRetryThroughKill: a publisher sends 300 events to node A, each with its key, and
// retries every one that gets no 200 on node B, as a careful publisher does; a tenth of them
// it sends to both nodes whatever the answer (a retry of a request that did go through). Node
// A is killed with SIGKILL a third of the way through. The subscribers on B and C receive
// every event exactly once, in the publisher's order: a retry never delivers twice (the
// channel keeps history: the Redis script keeps an event of a key once, whichever node
// publishes it).
func TestClusterRetryThroughKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three herald processes and a redis-server")
	}
	bus := servicetest.Redis(t)
	config := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(config, []byte(historyKillConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		n := startNode(t, name, bus.URL(), "--config", config)
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "redis", true) })
		nodes = append(nodes, n)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	const channel = "history-orders"
	subs := []*subscriber{subscribe(t, b, channel), subscribe(t, c, channel)}
	for _, s := range subs { // every node's interest is on the bus: a warm-up event reaches each
		poll.NoError(t, clusterWait, "a warm-up event to reach "+s.node.name, func() error {
			if status, err := a.publishKeyed(channel, "warm-up", "warm-up"); err != nil || status != http.StatusOK {
				return fmt.Errorf("status %d, %v", status, err)
			}
			select {
			case m := <-s.msgs:
				if m.Event == "order" && strings.Contains(string(m.Data), "warm-up") {
					return nil
				}
				return fmt.Errorf("got %s %q", m.Event, m.Data)
			case <-time.After(attemptWait):
				return fmt.Errorf("nothing within %v", attemptWait)
			}
		})
	}
	const events = 300
	a.client.Timeout, b.client.Timeout = 2*time.Second, 10*time.Second
	retried, both, killedAt := 0, 0, 0
	target := a
	for seq := 1; seq <= events; seq++ {
		if seq == events/3 { // while the publishes go on: some are in flight when it dies
			go func() { _ = a.cmd.Process.Kill() }() // exactly node A's pid
		}
		key, data := "order-"+strconv.Itoa(seq), strconv.Itoa(seq)
		status, err := target.publishKeyed(channel, data, key)
		if err != nil && target == a {
			select {
			case <-a.done: // A is gone: B from now on
				target, killedAt = b, seq
			default:
			}
		}
		if seq%10 == 0 && target == a {
			both++
			status, err = 0, nil // retry on B as if A's answer had been lost
		}
		if status != http.StatusOK {
			retried++
		}
		for attempt := 0; status != http.StatusOK; attempt++ {
			if attempt == 50 {
				t.Fatalf("event %d: no 200 on node B after 50 retries (last: %d, %v)", seq, status, err)
			}
			time.Sleep(100 * time.Millisecond)
			status, err = b.publishKeyed(channel, data, key)
		}
	}
	if killedAt == 0 {
		t.Fatal("no publish to node A failed after its kill")
	}
	t.Logf("%d events, %d retried on node B (%d sent to both nodes on purpose); node A killed at event %d, its first failed publish event %d",
		events, retried, both, events/3, killedAt)
	for _, s := range subs {
		next := 1
		poll.NoError(t, 2*clusterWait, s.node.name+" to receive every event once, in order", func() error {
			for {
				select {
				case m, ok := <-s.msgs:
					if !ok || m.Close != 0 {
						return fmt.Errorf("the subscriber was closed (%d) after event %d", m.Close, next-1)
					}
					if m.Event != "order" {
						continue
					}
					var d string
					_ = json.Unmarshal(m.Data, &d)
					if d == "warm-up" {
						continue
					}
					if d != strconv.Itoa(next) {
						t.Fatalf("%s received event %q where event %d was next (a duplicate, a loss or a reorder)", s.node.name, d, next)
					}
					next++
				default:
					if next > events {
						return nil
					}
					return fmt.Errorf("received events 1..%d of %d", next-1, events)
				}
			}
		})
		select {
		case m := <-s.msgs:
			if m.Event == "order" {
				t.Fatalf("%s received %s %q after the last event: a duplicate", s.node.name, m.Event, m.Data)
			}
		case <-time.After(time.Second):
		}
	}
}
