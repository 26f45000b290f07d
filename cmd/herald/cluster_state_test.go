package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// The state tests' nodes announce their share every stateHeartbeat and declare a node dead
// after stateNodeTimeout, so that a death is noticed within seconds.
const (
	stateHeartbeat   = 500 * time.Millisecond
	stateNodeTimeout = 3 * time.Second
	// deathMargin is what a busy machine (two shared cores, -race) may add to the
	// node_timeout + heartbeat within which a dead node is noticed.
	deathMargin = 5 * time.Second
)

// smallApp is the state tests' second app: its presence channels hold at most two members.
var smallApp = &herald.App{ID: "app-small", Key: "small-key", Secret: "small-secret"}

const stateConfig = `apps:
  - {id: app-id, key: app-key, secret: app-secret, enable_client_messages: true, enable_user_authentication: true}
  - {id: app-small, key: small-key, secret: small-secret, limits: {max_presence_members: 2}}
`

// stateCluster is a bus of one engine and the `herald serve` nodes on it, with the
// development app and smallApp.
type stateCluster struct {
	engine string
	bus    *servicetest.Server
	config string // the nodes' config file
}

func newStateCluster(t *testing.T, engine string) *stateCluster {
	t.Helper()
	c := &stateCluster{engine: engine, config: filepath.Join(t.TempDir(), "herald.yaml")}
	if err := os.WriteFile(c.config, []byte(stateConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if engine == "nats" {
		c.bus = servicetest.NATS(t)
	} else {
		c.bus = servicetest.Redis(t)
	}
	return c
}

// start starts a node with node id name and waits until it has its bus.
func (c *stateCluster) start(t *testing.T, name string) *node {
	t.Helper()
	n := startNode(t, name, c.bus.URL(), "--config", c.config,
		"--cluster-heartbeat", stateHeartbeat.String(), "--cluster-node-timeout", stateNodeTimeout.String())
	n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", c.engine, true) })
	return n
}

func (c *stateCluster) startN(t *testing.T, names ...string) []*node {
	t.Helper()
	var nodes []*node
	for _, name := range names {
		nodes = append(nodes, c.start(t, name))
	}
	return nodes
}

func eachEngine(t *testing.T, f func(t *testing.T, c *stateCluster)) {
	if testing.Short() {
		t.Skip("runs nats-server, redis-server and herald nodes")
	}
	for _, engine := range []string{"nats", "redis"} {
		t.Run(engine, func(t *testing.T) { f(t, newStateCluster(t, engine)) })
	}
}

// wantMembers fails unless p's member events on channel, counted by user, are exactly
// added and removed (users not named: none).
func wantMembers(t *testing.T, p *peer, channel string, added, removed map[string]int) {
	t.Helper()
	gotAdded, gotRemoved := p.memberCounts(channel)
	if !maps.Equal(gotAdded, added) || !maps.Equal(gotRemoved, removed) {
		t.Errorf("%s on %s: member_added %v, member_removed %v; want %v and %v; it got:\n%s",
			p.name, channel, gotAdded, gotRemoved, added, removed, p.dump())
	}
}

// wantView fails unless the member list p's client holds for channel is want.
func wantView(t *testing.T, p *peer, channel string, want ...string) {
	t.Helper()
	if got := p.view(t, channel); !slices.Equal(got, want) {
		t.Errorf("%s: its client's members of %s are %v, want %v; it got:\n%s", p.name, channel, got, want, p.dump())
	}
}

func none() map[string]int { return map[string]int{} }

func once(users ...string) map[string]int {
	m := map[string]int{}
	for _, u := range users {
		m[u]++
	}
	return m
}

// TestClusterState runs three nodes and checks, on each engine, that a Pusher client and the
// REST API see one server: presence members joined on any node (one user on two nodes is one
// member), their member_added and member_removed, subscription and user counts in every REST
// call that reports them, max_presence_members, terminate_connections and cache channels.
func TestClusterState(t *testing.T) {
	eachEngine(t, func(t *testing.T, c *stateCluster) {
		nodes := c.startN(t, "node-a", "node-b", "node-c")
		a, b, nc := nodes[0], nodes[1], nodes[2]
		const room = "presence-room"

		t.Run("presence", func(t *testing.T) {
			u1 := connectPeer(t, a, restApp, "u1")
			if got := u1.join(t, room); !slices.Equal(got, []string{"u1"}) {
				t.Fatalf("u1's subscription_succeeded lists %v", got)
			}
			waitOccupancy(t, nodes, restApp, room, occupancy{1, []string{"u1"}})
			u2 := connectPeer(t, b, restApp, "u2")
			if got := u2.join(t, room); !slices.Equal(got, []string{"u1", "u2"}) {
				t.Fatalf("u2 joined on node-b; its subscription_succeeded lists %v, want [u1 u2]", got)
			}
			u1.wait(t, "member_added u2", memberEvent("member_added", room, "u2"))
			waitOccupancy(t, nodes, restApp, room, occupancy{2, []string{"u1", "u2"}})
			u3 := connectPeer(t, nc, restApp, "u3")
			if got := u3.join(t, room); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
				t.Fatalf("u3 joined on node-c; its subscription_succeeded lists %v, want [u1 u2 u3]", got)
			}
			for _, p := range []*peer{u1, u2} {
				p.wait(t, "member_added u3", memberEvent("member_added", room, "u3"))
			}
			waitOccupancy(t, nodes, restApp, room, occupancy{3, []string{"u1", "u2", "u3"}})

			// u1's second connection, on node-c: one more subscription, the same members.
			u1c := connectPeer(t, nc, restApp, "u1")
			if got := u1c.join(t, room); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
				t.Fatalf("u1's second connection (node-c): subscription_succeeded lists %v, want [u1 u2 u3]", got)
			}
			waitOccupancy(t, nodes, restApp, room, occupancy{4, []string{"u1", "u2", "u3"}})
			// A publish's info reports the cluster's counts too, on every node.
			for _, n := range nodes {
				body := []byte(`{"name":"tick","channel":"` + room + `","data":"info","info":"subscription_count,user_count"}`)
				var got struct {
					Channels map[string]map[string]int `json:"channels"`
				}
				if err := n.restJSON(restApp, "POST", "/apps/"+restApp.ID+"/events", nil, body, &got); err != nil {
					t.Fatal(err)
				}
				if want := map[string]int{"subscription_count": 4, "user_count": 3}; !maps.Equal(got.Channels[room], want) {
					t.Errorf("%s: a publish's info is %v, want %v", n.name, got.Channels, want)
				}
			}

			// u1 leaves node-a but is still on node-c: no member_removed.
			u1.close()
			waitOccupancy(t, nodes, restApp, room, occupancy{3, []string{"u1", "u2", "u3"}})
			// u1's last connection leaves: member_removed once, on every node.
			u1c.send(t, map[string]any{"event": "pusher:unsubscribe", "data": map[string]string{"channel": room}})
			for _, p := range []*peer{u2, u3} {
				p.wait(t, "member_removed u1", memberEvent("member_removed", room, "u1"))
			}
			waitOccupancy(t, nodes, restApp, room, occupancy{2, []string{"u2", "u3"}})
			marker(t, a, room, u2, u3)
			wantMembers(t, u1, room, once("u2", "u3"), none())
			wantMembers(t, u2, room, once("u3"), once("u1"))
			wantMembers(t, u3, room, none(), once("u1"))
			wantMembers(t, u1c, room, none(), none())
			wantView(t, u2, room, "u2", "u3")
			wantView(t, u3, room, "u2", "u3")

			// Every presence connection leaves: nothing is left anywhere.
			u2.close()
			u3.close()
			waitOccupancy(t, nodes, restApp, room, occupancy{0, []string{}})
		})

		t.Run("subscription counts", func(t *testing.T) {
			for _, n := range []*node{a, b, b, nc, nc, nc} {
				subscribe(t, n, "news")
			}
			waitOccupancy(t, nodes, restApp, "news", occupancy{subs: 6})
		})

		t.Run("max presence members", func(t *testing.T) {
			const small = "presence-small"
			s1 := connectPeer(t, a, smallApp, "u1")
			s1.join(t, small)
			s2 := connectPeer(t, b, smallApp, "u2")
			s2.join(t, small)
			waitOccupancy(t, nodes, smallApp, small, occupancy{2, []string{"u1", "u2"}})
			// The channel is full for a third user, whatever node it joins on.
			for _, n := range nodes {
				s3 := connectPeer(t, n, smallApp, "u3")
				s3.presenceSub(t, small)
				m := s3.wait(t, "the answer to u3's subscription", func(m wstest.Message) bool {
					return m.Channel == small && (m.Event == "pusher:subscription_error" || m.Event == "pusher_internal:subscription_succeeded")
				})
				var e struct{ Status int }
				if m.Event != "pusher:subscription_error" || json.Unmarshal([]byte(m.DataString()), &e) != nil || e.Status != 4100 {
					t.Errorf("%s: a third member joined a channel limited to 2: %s %s; want subscription_error with status 4100",
						n.name, m.Event, m.DataString())
				}
				s3.close()
			}
			// A member already in it may join on another node.
			s1c := connectPeer(t, nc, smallApp, "u1")
			if got := s1c.join(t, small); !slices.Equal(got, []string{"u1", "u2"}) {
				t.Errorf("u1's second connection lists %v, want [u1 u2]", got)
			}
			waitOccupancy(t, nodes, smallApp, small, occupancy{3, []string{"u1", "u2"}})
			// Once one leaves, a third user fits again.
			s2.close()
			waitOccupancy(t, nodes, smallApp, small, occupancy{2, []string{"u1"}})
			s3 := connectPeer(t, nc, smallApp, "u3")
			if got := s3.join(t, small); !slices.Equal(got, []string{"u1", "u3"}) {
				t.Errorf("u3 lists %v, want [u1 u3]", got)
			}
			for _, p := range []*peer{s1, s1c} {
				p.wait(t, "member_added u3", memberEvent("member_added", small, "u3"))
			}
			marker(t, b, small, s1, s1c, s3)
			wantMembers(t, s1, small, once("u2", "u3"), once("u2"))
			wantMembers(t, s1c, small, once("u3"), once("u2"))
			wantMembers(t, s3, small, none(), none())
		})

		t.Run("terminate connections", func(t *testing.T) {
			signin := func(n *node, user string) *peer {
				p := connectPeer(t, n, restApp, user)
				ud := `{"id":"` + user + `"}`
				p.send(t, map[string]any{"event": "pusher:signin", "data": map[string]string{
					"user_data": ud, "auth": restApp.Key + ":" + pusher.Sign(restApp.Secret, p.sid+"::user::"+ud)}})
				p.wait(t, "signin_success", event("pusher:signin_success", ""))
				return p
			}
			gone := []*peer{signin(a, "leaver"), signin(b, "leaver")}
			stays := []*peer{signin(a, "stayer"), signin(nc, "stayer")}
			// node-c, where the user has no connection, terminates it everywhere.
			path := "/apps/" + restApp.ID + "/users/leaver/terminate_connections"
			if status, body, err := nc.rest(restApp, "POST", path, nil, []byte("{}")); err != nil || status != http.StatusOK {
				t.Fatalf("terminate_connections: %d %s %v", status, body, err)
			}
			for _, p := range gone {
				m := p.wait(t, "the close of a terminated user's connection", func(m wstest.Message) bool { return m.Close != 0 })
				if m.Close != 4009 {
					t.Errorf("%s: closed with %d, want 4009", p.name, m.Close)
				}
			}
			// Another user's connections stay open: each still answers a ping.
			for _, p := range stays {
				p.send(t, map[string]any{"event": "pusher:ping", "data": map[string]string{}})
				p.wait(t, "pusher:pong", event("pusher:pong", ""))
				if slices.ContainsFunc(p.history(), func(m received) bool { return m.Close != 0 }) {
					t.Errorf("%s was closed:\n%s", p.name, p.dump())
				}
			}
		})

		t.Run("cache channels", func(t *testing.T) {
			published := time.Now()
			if status, _, body := a.publish(t, "cache-x", "last on node-a"); status != http.StatusOK {
				t.Fatalf("publish: %d %s", status, body)
			}
			// subscribeCache subscribes a new client of n to channel and returns the event or
			// cache_miss that follows its subscription_succeeded.
			subscribeCache := func(n *node, channel string) wstest.Message {
				p := connectPeer(t, n, restApp, "")
				defer p.close()
				if err := p.c.Subscribe(channel, "", ""); err != nil {
					t.Fatal(err)
				}
				p.wait(t, "subscription_succeeded", event("pusher_internal:subscription_succeeded", channel))
				return p.wait(t, "the cached event or cache_miss", func(m wstest.Message) bool {
					return m.Channel == channel && (m.Event == "tick" || m.Event == "pusher:cache_miss")
				}).Message
			}
			for _, n := range nodes {
				// The event reaches the other nodes over the bus after the publish has
				// answered: a subscriber quicker than that may still get cache_miss, so a
				// new one tries again, for at most cacheWait.
				const cacheWait = 5 * time.Second
				attempts := 0
				for {
					attempts++
					m := subscribeCache(n, "cache-x")
					if m.Event == "tick" && m.DataString() == "last on node-a" {
						break
					}
					if m.Event != "pusher:cache_miss" || time.Since(published) > cacheWait {
						t.Fatalf("%s: a subscriber to cache-x got %s %q %v after the publish on node-a (attempt %d); want the event",
							n.name, m.Event, m.DataString(), time.Since(published).Round(time.Millisecond), attempts)
					}
					time.Sleep(20 * time.Millisecond) // the pace of the attempts
				}
				if attempts > 1 {
					t.Logf("%s: the cached event came to the subscriber of attempt %d, %v after the publish",
						n.name, attempts, time.Since(published).Round(time.Millisecond))
				}
				if m := subscribeCache(n, "cache-never"); m.Event != "pusher:cache_miss" {
					t.Errorf("%s: a subscriber to a cache channel nobody published on got %s %q, want pusher:cache_miss", n.name, m.Event, m.DataString())
				}
			}
		})
	})
}

// TestClusterNodeDeath kills a node with SIGKILL (kill -9) under presence members, on each
// engine: within node_timeout + heartbeat the members on the other nodes get one
// member_removed per user who was only on the dead node, none for a user also on a live
// node, and REST leaves the dead node out; restarted with the same node id, the node's new
// members count once. Then the node is killed and restarted at once, before it could be
// declared dead: its new incarnation's members stay, also once its former self times out.
// With HERALD_BENCH_KILLS=n the node is killed n times (and restarted after each), and the
// time from kill to member_removed (min, median, max) is logged for docs/benchmarks.md.
func TestClusterNodeDeath(t *testing.T) {
	kills := 1
	if v := os.Getenv("HERALD_BENCH_KILLS"); v != "" {
		if _, err := fmt.Sscan(v, &kills); err != nil || kills < 1 {
			t.Fatalf("HERALD_BENCH_KILLS=%q: want a positive number", v)
		}
	}
	eachEngine(t, func(t *testing.T, c *stateCluster) {
		nodes := c.startN(t, "node-a", "node-b", "node-c")
		a, b, nc := nodes[0], nodes[1], nodes[2]
		live := nodes[:2]
		const room = "presence-room"
		all := []string{"ua", "ub", "uc", "ushared"}

		ua := connectPeer(t, a, restApp, "ua")
		ua.join(t, room)
		waitOccupancy(t, nodes, restApp, room, occupancy{1, all[:1]})
		ub := connectPeer(t, b, restApp, "ub")
		ub.join(t, room)
		waitOccupancy(t, nodes, restApp, room, occupancy{2, all[:2]})
		connectPeer(t, nc, restApp, "uc").join(t, room)
		connectPeer(t, nc, restApp, "ushared").join(t, room)
		waitOccupancy(t, nodes, restApp, room, occupancy{4, all})
		sharedA := connectPeer(t, a, restApp, "ushared")
		sharedA.join(t, room)
		subscribe(t, a, "news")
		subscribe(t, nc, "news")
		subscribe(t, nc, "news")
		waitOccupancy(t, nodes, restApp, room, occupancy{5, all})
		waitOccupancy(t, nodes, restApp, "news", occupancy{subs: 3})
		watchers := []*peer{ua, ub, sharedA}

		// killAndWatch kills node-c and returns the time from the kill to uc's member_removed
		// at the last of the watchers.
		killAndWatch := func() time.Duration {
			t.Helper()
			killed := time.Now()
			nc.kill(t)
			var took []time.Duration
			for _, p := range watchers {
				m := p.wait(t, "member_removed uc", memberEvent("member_removed", room, "uc"))
				took = append(took, m.at.Sub(killed))
			}
			detected := slices.Max(took)
			t.Logf("%s: kill -9 → member_removed at every remaining member %v (%v each; node_timeout %v + heartbeat %v)",
				c.engine, detected.Round(time.Millisecond), roundAll(took), stateNodeTimeout, stateHeartbeat)
			if limit := stateNodeTimeout + stateHeartbeat + deathMargin; detected > limit {
				t.Errorf("the dead node was noticed %v after its kill; want within node_timeout + heartbeat (+ %v for a busy machine) = %v",
					detected, deathMargin, limit)
			}
			return detected
		}
		// restart starts node-c again under its id, waits until it knows the others'
		// members, and joins uc and ushared on it again.
		restart := func() {
			t.Helper()
			nc = c.start(t, "node-c")
			nodes = []*node{a, b, nc}
			waitOccupancy(t, nodes, restApp, room, occupancy{3, []string{"ua", "ub", "ushared"}})
			ucAgain := connectPeer(t, nc, restApp, "uc")
			if got := ucAgain.join(t, room); !slices.Equal(got, all) {
				t.Errorf("uc on the restarted node-c lists %v, want %v", got, all)
			}
			connectPeer(t, nc, restApp, "ushared").join(t, room)
			waitOccupancy(t, nodes, restApp, room, occupancy{5, all})
		}

		detections := []time.Duration{killAndWatch()}
		waitOccupancy(t, live, restApp, room, occupancy{3, []string{"ua", "ub", "ushared"}})
		waitOccupancy(t, live, restApp, "news", occupancy{subs: 1})
		marker(t, b, room, watchers...)
		for _, p := range watchers {
			added := once("ub", "uc", "ushared") // ua joined first, ub second, sharedA last
			switch p {
			case ub:
				added = once("uc", "ushared")
			case sharedA:
				added = none()
			}
			wantMembers(t, p, room, added, once("uc"))
			wantView(t, p, room, "ua", "ub", "ushared")
		}

		restart()
		subscribe(t, nc, "news")
		waitOccupancy(t, nodes, restApp, "news", occupancy{subs: 2})
		for range kills - 1 {
			detections = append(detections, killAndWatch())
			restart()
		}
		if len(detections) > 1 {
			slices.Sort(detections)
			t.Logf("%s: kill -9 → member_removed over %d kills: min %v, median %v, max %v", c.engine, len(detections),
				detections[0].Round(time.Millisecond), detections[len(detections)/2].Round(time.Millisecond),
				detections[len(detections)-1].Round(time.Millisecond))
		}

		// Killed and restarted at once: the new incarnation's members are the node's share,
		// before and after the moment its former self would have been declared dead.
		killed := time.Now()
		nc.kill(t)
		restart()
		for time.Since(killed) < stateNodeTimeout+2*stateHeartbeat {
			for _, n := range nodes {
				if err := n.checkOccupancy(restApp, room, occupancy{5, all}); err != nil {
					t.Fatalf("%v after node-c's kill and restart: %v", time.Since(killed).Round(time.Millisecond), err)
				}
			}
			time.Sleep(100 * time.Millisecond) // the pace of checking that nothing changes
		}
		marker(t, b, room, watchers...)
		for _, p := range watchers {
			wantView(t, p, room, all...)
		}
	})
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// kill sends SIGKILL to the node (kill -9: no goodbye on the bus) and waits for it to exit.
func (n *node) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatalf("%s: kill: %v", n.name, err)
	}
	<-n.done
}
