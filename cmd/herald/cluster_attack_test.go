package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/redis/rueidis"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// attackSecret is the cluster secret of the attack tests' nodes that have one.
const attackSecret = "attack-test-secret-0123456789abcdef"

// TestClusterBusForgery reproduces, on each engine, what a review found that whoever can
// publish on the bus server could do, with a client of the server itself (no herald): send a
// private channel's subscriber an event, close a signed-in user's connections (a forged
// terminate), and close every subscriber of a presence channel with an event whose payload is
// a close frame. Without cluster.secret the first two succeed (the threat: the test shows the
// harness reproduces it) and the close frame is refused all the same (nodes check every frame
// the bus brings). With the secret every forgery is dropped and counted, and a sealed event
// captured from the bus and published again is delivered once: its copy is refused as
// replayed. The nodes without a secret run with cluster.insecure, and say so in
// herald_cluster_unsealed.
func TestClusterBusForgery(t *testing.T) {
	eachEngine(t, func(t *testing.T, c *stateCluster) {
		for _, secret := range []bool{false, true} {
			t.Run("secret="+strconv.FormatBool(secret), func(t *testing.T) { testBusForgery(t, c, secret) })
		}
	})
}

func testBusForgery(t *testing.T, c *stateCluster, secret bool) {
	extra := []string{"--cluster-insecure"}
	if secret {
		extra = []string{"--cluster-secret", attackSecret}
	}
	start := func(name string) *node {
		n := startNode(t, name, c.bus.URL(), append([]string{"--config", c.config}, extra...)...)
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", c.engine, true) })
		return n
	}
	a, b := start("node-a"), start("node-b")
	for _, n := range []*node{a, b} {
		if v, err := n.metric("cluster_unsealed"); err != nil || v != map[bool]float64{false: 1, true: 0}[secret] {
			t.Fatalf("%s: herald_cluster_unsealed %v (%v) with secret %v", n.name, v, err, secret)
		}
		if v, err := n.metric("cluster_bus_plaintext"); err != nil || v != 0 {
			t.Fatalf("%s: herald_cluster_bus_plaintext %v (%v) on a loopback bus", n.name, v, err)
		}
		if unsealed := strings.Contains(n.logs.String(), "CLUSTER BUS UNSEALED"); unsealed == secret {
			t.Fatalf("%s: warned of an unsealed bus %v with secret %v:\n%s", n.name, unsealed, secret, n.logs.String())
		}
	}
	raw := newRawBus(t, c)
	const private, room = "private-x", "presence-room"

	reader := connectPeer(t, a, restApp, "reader")
	reader.privateSub(t, private)
	member := connectPeer(t, a, restApp, "member")
	member.join(t, room)
	other := connectPeer(t, b, restApp, "other")
	other.join(t, room)
	victim := connectPeer(t, a, restApp, "victim")
	victim.signin(t)
	marker(t, b, private, reader)
	marker(t, b, room, member, other)

	// The forgeries, each as a node would encode it.
	forged := pusherFrame(`{"event":"forged","channel":"` + private + `","data":"\"pwned\""}`)
	raw.publish(t, restApp.ID, private, broker.AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent,
		App: restApp.ID, Channel: private, Node: "node-b", Payload: forged}))
	raw.publish(t, "", "control", broker.AppendMessage(nil, herald.BusMessage{Kind: herald.BusTerminate,
		Channel: "control", Node: "node-b", Payload: appendStrings(nil, restApp.ID, "victim")}))
	closeFrame := []byte{0x88, 0x02, 0x03, 0xe8} // close 1000
	raw.publish(t, restApp.ID, room, broker.AppendMessage(nil, herald.BusMessage{Kind: herald.BusEvent,
		App: restApp.ID, Channel: room, Node: "node-b", Payload: closeFrame}))

	// Whatever the forgeries did is done once a marker published after them has arrived.
	marker(t, b, private, reader)
	marker(t, b, room, member, other)
	gotForged := slices.ContainsFunc(reader.history(), func(m received) bool { return m.Event == "forged" })
	closed := func(p *peer) bool {
		return slices.ContainsFunc(p.history(), func(m received) bool { return m.Close != 0 })
	}
	if !secret {
		// The threat, reproduced: without a secret the bus is believed.
		if !gotForged {
			t.Errorf("without a secret the forged event did not reach the private channel's subscriber:\n%s", reader.dump())
		}
		victim.wait(t, "the forged terminate to close the victim", func(m wstest.Message) bool { return m.Close == 4009 })
	} else {
		if gotForged {
			t.Errorf("a forged event reached the private channel's subscriber:\n%s", reader.dump())
		}
		marker(t, a, private, reader) // the victim's node has handled the forged terminate too
		if closed(victim) {
			t.Errorf("a forged terminate closed the victim:\n%s", victim.dump())
		}
		waitMetric(t, a, "bus_forged_total", func(v float64) bool { return v >= 3 })
	}
	for _, p := range []*peer{member, other} {
		if closed(p) {
			t.Errorf("an event holding a close frame closed %s:\n%s", p.name, p.dump())
		}
	}
	if !secret {
		waitMetric(t, a, "bus_invalid_frames_total", func(v float64) bool { return v >= 1 })
		waitMetric(t, b, "bus_invalid_frames_total", func(v float64) bool { return v >= 1 })
		t.Logf("without a secret: the forged event reached %s, the forged terminate closed %s (4009); the close frame was refused", reader.name, victim.name)
		return
	}

	// A replay: an event a node sealed, captured on the bus and published again.
	captured := raw.capture(t, restApp.ID, private)
	body, _ := json.Marshal(map[string]string{"name": "legit", "channel": private, "data": "once"})
	if status, out, err := b.rest(restApp, "POST", "/apps/"+restApp.ID+"/events", nil, body); err != nil || status != http.StatusOK {
		t.Fatalf("publish: %d %s %v", status, out, err)
	}
	var sealed []byte
	select {
	case sealed = <-captured:
	case <-time.After(clusterWait):
		t.Fatal("the sealed event was not seen on the bus")
	}
	if sealed[0] != 4 {
		t.Fatalf("the event on the bus is not sealed: version %d", sealed[0])
	}
	raw.publish(t, restApp.ID, private, sealed)
	marker(t, b, private, reader)
	n := 0
	for _, m := range reader.history() {
		if m.Event == "legit" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the sealed event published twice reached the subscriber %d times, want once:\n%s", n, reader.dump())
	}
	waitMetric(t, a, "bus_replayed_total", func(v float64) bool { return v >= 1 })

	// The state stream replayed: node-b's announcements (its members, its heartbeats),
	// captured and published again, change nothing.
	state := raw.capture(t, "", "state")
	var announced [][]byte
	for len(announced) < 2 {
		select {
		case m := <-state:
			announced = append(announced, m)
		case <-time.After(clusterWait):
			t.Fatal("no state announcement seen on the bus")
		}
	}
	before, err := a.metric("bus_replayed_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range announced {
		raw.publish(t, "", "state", m)
	}
	waitMetric(t, a, "bus_replayed_total", func(v float64) bool { return v >= before+2 })
	marker(t, b, room, member, other)
	wantMembers(t, member, room, once("other"), none())
	for _, name := range []string{"bus_forged_total", "bus_replayed_total", "bus_invalid_frames_total"} {
		v, _ := a.metric(name)
		t.Logf("%s: %s %v", a.name, name, v)
	}
}

// privateSub subscribes p to a private channel, signed with its app's secret, and waits for
// the subscription.
func (p *peer) privateSub(t *testing.T, channel string) {
	t.Helper()
	if err := p.c.Subscribe(channel, p.app.Key+":"+pusher.Sign(p.app.Secret, p.sid+":"+channel), ""); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	p.wait(t, "subscription_succeeded on "+channel, event("pusher_internal:subscription_succeeded", channel))
}

// signin signs p in as its user.
func (p *peer) signin(t *testing.T) {
	t.Helper()
	data := `{"id":"` + p.user + `"}`
	p.send(t, map[string]any{"event": "pusher:signin", "data": map[string]string{
		"user_data": data, "auth": p.app.Key + ":" + pusher.Sign(p.app.Secret, p.sid+"::user::"+data)}})
	p.wait(t, "signin_success", func(m wstest.Message) bool { return m.Event == "pusher:signin_success" })
}

// pusherFrame is payload as a server's WebSocket text frame (under 126 bytes).
func pusherFrame(payload string) []byte {
	return append([]byte{0x81, byte(len(payload))}, payload...)
}

// appendStrings appends each string as the cluster layer's state encoding writes one: its
// length as a uvarint, then its bytes.
func appendStrings(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// rawBus is a client of the bus server itself, as an attacker who reaches it has.
type rawBus struct {
	publish func(t *testing.T, app, channel string, data []byte)
	capture func(t *testing.T, app, channel string) <-chan []byte // what is published from now on
}

func newRawBus(t *testing.T, c *stateCluster) rawBus {
	subject := func(app, channel string) string { return broker.Subject("herald", app, channel) }
	if c.engine == "nats" {
		nc, err := natsgo.Connect(c.bus.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return rawBus{
			publish: func(t *testing.T, app, channel string, data []byte) {
				if err := nc.Publish(subject(app, channel), data); err != nil {
					t.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
			},
			capture: func(t *testing.T, app, channel string) <-chan []byte {
				ch := make(chan []byte, 16)
				if _, err := nc.Subscribe(subject(app, channel), func(m *natsgo.Msg) {
					select {
					case ch <- m.Data:
					default:
					}
				}); err != nil {
					t.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				return ch
			},
		}
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.bus.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	ctx := context.Background()
	return rawBus{
		publish: func(t *testing.T, app, channel string, data []byte) {
			cmd := rc.B().Publish().Channel(subject(app, channel)).Message(rueidis.BinaryString(data)).Build()
			if err := rc.Do(ctx, cmd).Error(); err != nil {
				t.Fatal(err)
			}
		},
		capture: func(t *testing.T, app, channel string) <-chan []byte {
			ch := make(chan []byte, 16)
			sub, cancel := rc.Dedicate()
			t.Cleanup(cancel)
			sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
				select {
				case ch <- []byte(m.Message):
				default:
				}
			}})
			if err := sub.Do(ctx, sub.B().Subscribe().Channel(subject(app, channel)).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			return ch
		},
	}
}

// metric returns the value of the metric name (without the prefix herald_) that n serves.
func (n *node) metric(name string) (float64, error) {
	resp, err := n.client.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "herald_"+name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s: no metric %s", n.name, name)
}

// waitMetric waits until n's metric name satisfies ok.
func waitMetric(t *testing.T, n *node, name string, ok func(float64) bool) {
	t.Helper()
	poll.NoError(t, clusterWait, n.name+"'s "+name, func() error {
		v, err := n.metric(name)
		if err != nil {
			return err
		}
		if !ok(v) {
			return fmt.Errorf("%s is %v", name, v)
		}
		return nil
	})
}
