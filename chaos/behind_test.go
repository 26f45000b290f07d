//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// TestRecoverOnANodeBehind: a client that recovers on a node whose copy of the channel's
// history is behind the client's position (the node is cut off from its bus, or has not yet
// received the channel's last events) must not be handed back a position below its own, nor
// the events it had again. herald-chaos found it (NATS, --kafka, --fault-every 2s,6s, seed
// 7764018231275999: 76 duplicates): the node answered recovered:false, reason ahead, with its
// own last position, the client (as the recovery helper does) took that position, and the
// events between it and the client's own came again. The node now holds the recovery until
// its copy has caught up. The node here is partitioned from Redis; it keeps a subscriber of
// its own, so its copy of the channel stays open.
func TestRecoverOnANodeBehind(t *testing.T) {
	redisBin := service(t, "redis-server")
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nw := newNetwork(log, 2, false)
	t.Cleanup(nw.remove)
	if !nw.isolated {
		t.Skip("needs network namespaces (root): " + nw.refused)
	}
	dir := t.TempDir()
	b, err := newRedis(nw, dir, redisBin, "off")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(b.servers[0].proc.kill)
	if err := b.servers[0].start(ctx); err != nil {
		t.Fatal(err)
	}
	app := newApp()
	cfg, err := writeFile(dir, "herald.yaml", nodeConfig{app: app, history: 1000, secret: randomHex(32), activity: time.Minute}.yaml())
	if err != nil {
		t.Fatal(err)
	}
	bin := buildHerald(t)
	var nodes []*node
	for i := 1; i <= 2; i++ {
		n := newNode(nw, dir, bin, cfg, i, nodePort, b.url(i))
		t.Cleanup(n.proc.kill)
		if err := n.start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n.waitUp(ctx, startWait, connected); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	pub := &publisher{app: app, timeout: 10 * time.Second, client: probeClient}
	publish := func(seq int) {
		t.Helper()
		body := fmt.Sprintf(`{"name":"chaos","channel":"chaos-1","data":%q}`, payload{P: "p1", S: seq}.encode())
		if status, err := pub.post(ctx, nodes[0], []byte(body), fmt.Sprint("p1-", seq)); status != http.StatusOK {
			t.Fatalf("publishing %d: %d, %v", seq, status, err)
		}
	}
	const path = "/app/chaos-key?protocol=7"
	dial := func(n *node, recover *Position) *wstest.Client {
		t.Helper()
		c, err := wstest.Dial(n.addr, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.SocketID(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		data := map[string]any{"channel": "chaos-1"}
		if recover != nil {
			data["recover"] = recover
		}
		if err := c.WriteJSON(map[string]any{"event": "pusher:subscribe", "data": data}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// recovery reads until the recovery frame.
	recovery := func(c *wstest.Client) (pos Position, recovered bool, reason string) {
		t.Helper()
		m, err := c.Expect("pusher_internal:recovery", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Position
			Recovered bool
			Reason    string
		}
		_ = json.Unmarshal([]byte(m.DataString()), &r)
		return r.Position, r.Recovered, r.Reason
	}
	// next reads the next event's position.
	next := func(c *wstest.Client) Position {
		t.Helper()
		m, err := c.Expect("pusher_internal:position", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var p Position
		_ = json.Unmarshal([]byte(m.DataString()), &p)
		if _, err := c.Expect("chaos", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		return p
	}

	a := dial(nodes[0], nil)
	recovery(a)
	keep := dial(nodes[1], nil) // keeps node 2's copy of the channel open
	recovery(keep)
	for seq := 1; seq <= 3; seq++ {
		publish(seq)
		next(a)
		next(keep)
	}
	if err := nw.setLink(2, true, false); err != nil {
		t.Fatal(err)
	}
	linkUp := func() {
		if err := nw.setLink(2, true, true); err != nil {
			t.Error(err)
		}
	}
	defer linkUp()
	publish(4)
	publish(5)
	next(a)
	last := next(a) // the client's position: event 5
	a.Close()

	c := dial(nodes[1], &last)
	// The node holds the recovery until its copy has the client's position: nothing while
	// it is cut off, then an answer from the client's position once the link is back.
	if m, err := c.Read(2 * time.Second); err == nil && m.Event == "pusher_internal:recovery" {
		t.Errorf("the node cut off from the bus answered the recovery from %v at once: %s", last, m.Data)
	}
	linkUp()
	pos, recovered, reason := recovery(c)
	t.Logf("recovering from %v on the node that was cut off from the bus: recovered %v, reason %q, position %v", last, recovered, reason, pos)
	if pos.Epoch == last.Epoch && pos.Offset < last.Offset {
		t.Errorf("the node answered with position %v, below the client's %v (recovered %v, %q): the client will take it and receive events %d to %d again",
			pos, last, recovered, reason, pos.Offset+1, last.Offset)
	}
	if !recovered {
		t.Errorf("the recovery from %v was answered recovered:false, %q, once the node had caught up", last, reason)
	}
	publish(6)
	if p := next(c); p.Epoch == last.Epoch && p.Offset <= last.Offset {
		t.Errorf("after recovering from %v the client received the event at %v again", last, p)
	}
}
