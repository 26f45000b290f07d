package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// TestClusterCountsAndWatchlists runs two `herald serve` nodes on each bus engine with an app
// that enables subscription counts: a subscriber gets the cluster's count of its channel
// (subscribers on both nodes), and a watchlist on one node sees a user signed in on the other
// come online in its status and go offline when it leaves.
func TestClusterCountsAndWatchlists(t *testing.T) {
	eachEngine(t, func(t *testing.T, c *stateCluster) {
		c.config = filepath.Join(t.TempDir(), "features.yaml")
		conf := "apps:\n  - {id: app-id, key: app-key, secret: app-secret, enable_user_authentication: true, enable_subscription_count_event: true}\n"
		if err := os.WriteFile(c.config, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes := c.startN(t, "node-a", "node-b")
		a, b := nodes[0], nodes[1]

		onA := dialNode(t, a)
		if err := onA.Subscribe("room", "", ""); err != nil {
			t.Fatal(err)
		}
		waitNodeCount(t, onA, 1)
		onB := dialNode(t, b)
		if err := onB.Subscribe("room", "", ""); err != nil {
			t.Fatal(err)
		}
		waitNodeCount(t, onB, 2)
		waitNodeCount(t, onA, 2)
		onB.Close()
		waitNodeCount(t, onA, 1)

		bob, _ := signinNode(t, b, `{"id":"bob"}`)
		poll.NoError(t, clusterWait, "bob online in the status of a watchlist on the other node", func() error {
			ann, status := signinNode(t, a, `{"id":"ann","watchlist":["bob"]}`)
			if status != `{"events":[{"name":"online","user_ids":["bob"]}]}` {
				ann.Close()
				return fmt.Errorf("status %s", status)
			}
			bob.Close()
			m, err := ann.Expect("pusher_internal:watchlist_events", clusterWait)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.DataString(); got != `{"events":[{"name":"offline","user_ids":["bob"]}]}` {
				t.Fatalf("after bob left: %s", got)
			}
			return nil
		})
	})
}

// waitNodeCount reads c until a subscription count of want.
func waitNodeCount(t *testing.T, c *wstest.Client, want int) {
	t.Helper()
	for {
		m, err := c.Expect("pusher_internal:subscription_count", clusterWait)
		if err != nil {
			t.Fatalf("waiting for a subscription count of %d: %v", want, err)
		}
		var d struct {
			N int `json:"subscription_count"`
		}
		if err := json.Unmarshal([]byte(m.DataString()), &d); err != nil {
			t.Fatal(err)
		}
		if d.N == want {
			return
		}
	}
}

// signinNode connects to n, signs in with userData and returns the client with the data of
// its first watchlist event ("" when the user data has no watchlist).
func signinNode(t *testing.T, n *node, userData string) (*wstest.Client, string) {
	t.Helper()
	c, err := wstest.Dial(n.api, "/app/"+restApp.Key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sid, err := c.SocketID(clusterWait)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteJSON(map[string]any{"event": "pusher:signin", "data": map[string]string{
		"user_data": userData, "auth": restApp.Key + ":" + pusher.Sign(restApp.Secret, sid+"::user::"+userData)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher:signin_success", clusterWait); err != nil {
		t.Fatal(err)
	}
	ud, err := pusher.DecodeUserData(userData)
	if err != nil || len(ud.Watchlist) == 0 {
		return c, ""
	}
	m, err := c.Expect("pusher_internal:watchlist_events", clusterWait)
	if err != nil {
		t.Fatal(err)
	}
	return c, m.DataString()
}
