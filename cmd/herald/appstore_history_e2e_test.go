package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// storePosition is the data of pusher_internal:position and pusher_internal:recovery.
type storePosition struct {
	Epoch     string `json:"epoch"`
	Offset    uint64 `json:"offset"`
	Recovered *bool  `json:"recovered"`
	Reason    string `json:"reason"`
}

// publishApp triggers event "tick" on channel for app through n's REST API; it fails the
// test unless the node answers 200.
func publishApp(t *testing.T, n *node, app *herald.App, channel, data string) {
	t.Helper()
	path := "/apps/" + app.ID + "/events"
	body, _ := json.Marshal(map[string]string{"name": "tick", "channel": channel, "data": data})
	q := pusher.SignRequest(app, "POST", path, nil, body, time.Now())
	resp, err := n.client.Post("http://"+n.api+path+"?"+q.Encode(), "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s: publish: %v", n.name, err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: publish %s on %s: %d %s", n.name, data, channel, resp.StatusCode, b)
	}
}

// historyClient connects to n with key and subscribes to channel, recovering from since
// when not nil. It returns the client and what followed the subscription_succeeded: the
// events replayed, each with its position, and the recovery frame.
func historyClient(t *testing.T, n *node, key, channel string, since *herald.Position) (c *wstest.Client, events []string, positions []uint64, rec storePosition) {
	t.Helper()
	c, err := wstest.Dial(n.api, "/app/"+key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.SocketID(clusterWait); err != nil {
		t.Fatalf("%s: key %s: %v", n.name, key, err)
	}
	d := map[string]any{"channel": channel}
	if since != nil {
		d["recover"] = map[string]any{"epoch": since.Epoch, "offset": since.Offset}
	}
	if err := c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": d}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect("pusher_internal:subscription_succeeded", clusterWait); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Read(clusterWait)
		if err != nil {
			t.Fatalf("%s: %s after subscribing: %v", n.name, channel, err)
		}
		switch m.Event {
		case "pusher_internal:position":
			var p storePosition
			_ = json.Unmarshal([]byte(m.DataString()), &p)
			positions = append(positions, p.Offset)
		case "pusher_internal:recovery":
			if err := json.Unmarshal([]byte(m.DataString()), &rec); err != nil {
				t.Fatalf("recovery frame %s: %v", m.Data, err)
			}
			return c, events, positions, rec
		case "tick":
			events = append(events, m.DataString())
		default:
			t.Fatalf("%s: %s: unexpected %s before the recovery frame", n.name, channel, m.Event)
		}
	}
}

// nextTick reads c's next event and its position: each event comes after its position frame.
func nextTick(t *testing.T, c *wstest.Client) (string, herald.Position) {
	t.Helper()
	m, err := c.Expect("pusher_internal:position", clusterWait)
	if err != nil {
		t.Fatal(err)
	}
	var p storePosition
	_ = json.Unmarshal([]byte(m.DataString()), &p)
	ev, err := c.Read(clusterWait)
	if err != nil || ev.Event != "tick" {
		t.Fatalf("after a position: %+v, %v; want its event", ev, err)
	}
	return ev.DataString(), herald.Position{Epoch: p.Epoch, Offset: p.Offset}
}

// TestAppStoreHistory: apps inserted into PostgreSQL while herald runs keep history, without
// a restart: one by its own history column, one by the rule for apps by id of
// --app-store-history. A client that subscribes, leaves, misses events published over REST
// and comes back with recover from its position gets them all, once, in order, then the
// live events; on one node, and on two nodes of a Redis cluster (leaving one, coming back
// on the other). A rule changed in the table applies to the next channels.
func TestAppStoreHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts PostgreSQL, Redis and herald nodes")
	}
	pg := servicetest.Postgres(t)
	url := pg.PostgresURL()
	redis := servicetest.Redis(t)
	for _, tc := range []struct {
		name  string
		nodes int
		bus   string
	}{{"OneNode", 1, ""}, {"RedisCluster", 2, "redis://" + redis.Addr() + "/0"}} {
		t.Run(tc.name, func(t *testing.T) {
			table := "apps_" + strings.ToLower(tc.name)
			pgExec(t, url, strings.Replace(soketiPostgres, "apps (", table+" (", 1))
			// As docs/app-stores.md adds it to Soketi's table.
			pgExec(t, url, "ALTER TABLE "+table+" ADD COLUMN history jsonb")
			flags := []string{"--app-store-postgres-url", url, "--app-store-table", table, "--app-store-postgres-install-trigger",
				"--app-store-refresh", "1s", "--app-store-history", `[{"apps":"tenant-*","channels":"chat-*","size":100,"ttl":"10m"}]`}
			var nodes []*node
			for i := range tc.nodes {
				name := fmt.Sprintf("node-%c", 'a'+i)
				n := startNode(t, name, tc.bus, flags...)
				until(t, name+" up with the app store", func() bool {
					h := n.storeHealth(t)
					return h.Status == "ok" && h.AppStore != nil && h.AppStore.Up && h.AppStore.Listening
				})
				nodes = append(nodes, n)
			}
			first, last := nodes[0], nodes[len(nodes)-1]

			own := &herald.App{ID: "auction-house", Key: "auction-house-key", Secret: "auction-house-secret"}
			byID := &herald.App{ID: "tenant-7", Key: "tenant-7-key", Secret: "tenant-7-secret"}
			insert := `INSERT INTO ` + table + ` (id, "key", secret, max_connections, enable_client_messages, "enabled", max_backend_events_per_sec,
				max_client_events_per_sec, max_read_req_per_sec, webhooks, enable_user_authentication, history)
				VALUES ($1, $2, $3, -1, 0, 1, -1, -1, -1, '[]', 0, $4)`
			pgExec(t, url, insert, own.ID, own.Key, own.Secret, `[{"channels": "auction-*", "size": 1000, "ttl": "10m"}]`)
			pgExec(t, url, insert, byID.ID, byID.Key, byID.Secret, nil)
			for _, n := range nodes {
				for _, key := range []string{own.Key, byID.Key} {
					until(t, n.name+" to accept "+key, func() bool { c, _ := dialKey(t, n, key); return c != nil })
				}
			}

			for _, tt := range []struct {
				app     *herald.App
				channel string
			}{{own, "auction-42"}, {byID, "chat-1"}} {
				// Recovering from an epoch the channel never had: a history channel answers
				// epoch_changed with its position (in a cluster, no epoch before its first
				// event), one without history no_history.
				c, events, _, rec := historyClient(t, first, tt.app.Key, tt.channel, &herald.Position{Epoch: "never", Offset: 1})
				if len(events) != 0 || rec.Recovered == nil || *rec.Recovered || rec.Reason != "epoch_changed" {
					t.Fatalf("%s %s: first subscription: %v, %+v; want epoch_changed and the channel's position", tt.app.ID, tt.channel, events, rec)
				}
				for i := 1; i <= 3; i++ {
					publishApp(t, nodes[i%len(nodes)], tt.app, tt.channel, fmt.Sprint(i))
				}
				var at herald.Position
				for i := 1; i <= 3; i++ {
					ev, pos := nextTick(t, c)
					if ev != fmt.Sprint(i) || pos.Offset != rec.Offset+uint64(i) || pos.Epoch == "" {
						t.Fatalf("%s: live event %d: %q at %+v, want offset %d", tt.app.ID, i, ev, pos, rec.Offset+uint64(i))
					}
					at = pos
				}
				c.Close()
				for i := 4; i <= 8; i++ {
					publishApp(t, nodes[i%len(nodes)], tt.app, tt.channel, fmt.Sprint(i))
				}

				o := at.Offset
				c, events, positions, back := historyClient(t, last, tt.app.Key, tt.channel, &at)
				if strings.Join(events, ",") != "4,5,6,7,8" || fmt.Sprint(positions) != fmt.Sprint([]uint64{o + 1, o + 2, o + 3, o + 4, o + 5}) {
					t.Fatalf("%s on %s: replayed %v at %v; want 4..8, once each, in order, at offsets %d..%d", tt.app.ID, last.name, events, positions, o+1, o+5)
				}
				if back.Recovered == nil || !*back.Recovered || back.Epoch != at.Epoch || back.Offset != o+5 {
					t.Fatalf("%s on %s: recovery frame %+v, want recovered at offset %d of %s", tt.app.ID, last.name, back, o+5, at.Epoch)
				}
				publishApp(t, first, tt.app, tt.channel, "9")
				if ev, pos := nextTick(t, c); ev != "9" || pos != (herald.Position{Epoch: at.Epoch, Offset: o + 6}) {
					t.Fatalf("%s: the live event after the recovery: %q at %+v, want 9 at %d", tt.app.ID, ev, pos, o+6)
				}
			}
			// The rule changed in the table: every node's next channels follow it.
			pgExec(t, url, "UPDATE "+table+` SET history = '[{"channels": "bids-*", "size": 10, "ttl": 60}]' WHERE id = $1`, own.ID)
			for _, n := range nodes {
				until(t, n.name+" to keep history for bids-*", func() bool {
					c, _, _, rec := historyClient(t, n, own.Key, "bids-1", &herald.Position{Epoch: "never", Offset: 1})
					c.Close()
					return rec.Reason == "epoch_changed"
				})
				c, _, _, rec := historyClient(t, n, own.Key, "auction-43", &herald.Position{Epoch: "never", Offset: 1})
				c.Close()
				if rec.Reason != "no_history" {
					t.Errorf("%s: auction-43 after its rule was replaced: %+v, want no_history", n.name, rec)
				}
			}
			for _, n := range nodes {
				if err := n.stop(); err != nil {
					t.Errorf("%s: %v", n.name, err)
				}
			}
		})
	}
}
