package session_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/rueidis"
)

// storeEngine is a real engine and what a test does to its store: snapshot takes its state
// (every key or message of the test's prefix), back puts it back to a snapshot (a power cut
// that loses what was written since, and keeps the epoch), lose removes it all (a cut that
// loses the channel's whole history).
type storeEngine struct {
	engine
	snapshot func(t *testing.T) any
	back     func(t *testing.T, snap any)
	lose     func(t *testing.T)
}

// rollbackEngines are Redis and NATS with JetStream, each a server of its own, the nodes of a
// test on a bus prefix of their own.
func rollbackEngines(t *testing.T) map[string]storeEngine {
	rs, ns := servicetest.Redis(t), servicetest.NATSJetStream(t)
	mk := func(*testing.T) string { return "h" + strconv.FormatInt(time.Now().UnixNano(), 36) }
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	ctx := context.Background()
	redisKeys := func(t *testing.T) []string {
		keys, err := rc.Do(ctx, rc.B().Keys().Pattern(prefixOf(t, mk)+".history.*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	nc, err := natsgo.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// theStream is the test's one history stream (one app, one rule).
	theStream := func(t *testing.T) jetstream.Stream {
		name, err := js.StreamNameBySubject(ctx, prefixOf(t, mk)+".history.>")
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return map[string]storeEngine{
		"redis": {
			engine: func(t *testing.T, id string, h herald.BusHandler) (herald.Broker, herald.History) {
				b, err := redis.New(redis.Config{URL: rs.URL(), Common: broker.Common{NodeID: id, Prefix: prefixOf(t, mk)}}, h)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close(context.Background()) })
				return b, redis.NewHistory(b)
			},
			snapshot: func(t *testing.T) any {
				dumps := map[string]string{}
				for _, k := range redisKeys(t) {
					d, err := rc.Do(ctx, rc.B().Dump().Key(k).Build()).ToString()
					if err != nil {
						t.Fatal(err)
					}
					dumps[k] = d
				}
				return dumps
			},
			back: func(t *testing.T, snap any) {
				for k, d := range snap.(map[string]string) {
					if err := rc.Do(ctx, rc.B().Restore().Key(k).Ttl(0).SerializedValue(d).Replace().Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
			},
			lose: func(t *testing.T) {
				for _, k := range redisKeys(t) {
					if err := rc.Do(ctx, rc.B().Del().Key(k).Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
			},
		},
		"nats": {
			engine: func(t *testing.T, id string, h herald.BusHandler) (herald.Broker, herald.History) {
				b, err := nats.New(nats.Config{URL: ns.URL(), Common: broker.Common{NodeID: id, Prefix: prefixOf(t, mk)}}, h)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close(context.Background()) })
				hist, err := nats.NewHistory(b)
				if err != nil {
					t.Fatal(err)
				}
				return b, hist
			},
			// JetStream's snapshot is its messages; going back to it purges the stream and
			// stores them again as they were (their epoch and offsets in their headers).
			snapshot: func(t *testing.T) any {
				s := theStream(t)
				info, err := s.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var msgs []*natsgo.Msg
				for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
					m, err := s.GetMsg(ctx, seq)
					if err != nil {
						t.Fatal(err)
					}
					hdr := natsgo.Header{}
					for k, v := range m.Header {
						if !strings.HasPrefix(k, "Nats-") {
							hdr[k] = v
						}
					}
					msgs = append(msgs, &natsgo.Msg{Subject: m.Subject, Header: hdr, Data: m.Data})
				}
				return msgs
			},
			back: func(t *testing.T, snap any) {
				if err := theStream(t).Purge(ctx); err != nil {
					t.Fatal(err)
				}
				for _, m := range snap.([]*natsgo.Msg) {
					if _, err := js.PublishMsg(ctx, m); err != nil {
						t.Fatal(err)
					}
				}
			},
			lose: func(t *testing.T) {
				if err := js.DeleteStream(ctx, theStream(t).CachedInfo().Config.Name); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
}

// expectClosedBeforeAnyEvent reads c until its connection is closed, which must be with 4200
// (reconnect and recover), with no event before it.
func expectClosedBeforeAnyEvent(t *testing.T, c *wstest.Client, who string) {
	t.Helper()
	for {
		m, err := c.Read(patience)
		if err != nil {
			t.Fatalf("%s: %v; want the connection closed with 4200", who, err)
		}
		switch {
		case m.Close != 0:
			if m.Close != 4200 {
				t.Fatalf("%s: closed with %d, want 4200", who, m.Close)
			}
			return
		case m.Event == "pusher_internal:position":
			t.Fatalf("%s: a position frame %s after the store went back, before its connection was closed", who, m.DataString())
		case m.Event == "bid":
			t.Fatalf("%s: event %s delivered after the store went back, before its connection was closed", who, m.DataString())
		}
	}
}

// TestHistoryStoreWentBack: Redis or JetStream goes back within a channel's epoch (a power
// cut loses the last two events it acknowledged, and keeps the epoch): its next publishes
// would be given offsets 4 and 5 again. Whether the bus brings those events (live) or loses
// them (found by the check after the bus's loss, or at the next event), every node's live
// subscriber is closed with 4200 before any event at a reused position reaches it, the store moves to a new
// epoch, a recovery from the old position 5 answers recovered:false, epoch_changed, and the
// events published after go on in the new epoch.
func TestHistoryStoreWentBack(t *testing.T) {
	for name, en := range rollbackEngines(t) {
		for _, bus := range []string{"live", "check"} {
			t.Run(name+"/"+bus, func(t *testing.T) { storeWentBack(t, en, bus == "check") })
		}
	}
}

func storeWentBack(t *testing.T, en storeEngine, lossy bool) {
	var back atomic.Pointer[string] // the epoch the store went back in: with lossy, the bus loses its events
	drop := func(m herald.BusMessage) bool { e := back.Load(); return lossy && e != nil && m.Epoch == *e }
	n0, _ := startEngineNode(t, en.engine, "node-0", drop, historyApp)
	n1, _ := startEngineNode(t, en.engine, "node-1", drop, historyApp)
	const channel = "auction-back"
	c0, _ := join(t, n0, channel, "")
	c1, _ := join(t, n1, channel, "")
	publishN(t, n0.h, channel, 1, 3)
	snap := en.snapshot(t)
	publishN(t, n0.h, channel, 4, 5)
	readHistory(t, c0, 5, 1)
	readHistory(t, c1, 5, 1)
	page, err := n1.h.History(context.Background(), "app-id", channel, 0, 10)
	if err != nil || page.Latest.Offset != 5 {
		t.Fatalf("history before: %+v, %v", page.Latest, err)
	}
	old := page.Latest.Epoch

	back.Store(&old)
	en.back(t, snap)
	if page, err := n1.h.History(context.Background(), "app-id", channel, 0, 10); err != nil || page.Latest != (herald.Position{Epoch: old, Offset: 3}) {
		t.Fatalf("the store put back: %+v, %v; want offset 3 of the same epoch", page.Latest, err)
	}
	for _, d := range []string{"a", "b"} { // offsets 4 and 5 again, or of a new epoch
		if err := n0.h.Publish("app-id", herald.Event{Name: "bid", Channel: channel, Data: d}); err != nil {
			t.Fatal(err)
		}
	}
	expectClosedBeforeAnyEvent(t, c0, "node 0's subscriber")
	if lossy {
		// Node 1 finds it in its check after the bus's loss when the check reads the store
		// before node 0 ended the epoch there; after that (JetStream keeps the old epoch's
		// last offset, its events purged, until the next publish) it finds it at the next
		// event, of the new epoch, before delivering it. Either way before any event.
		if err := n0.h.Publish("app-id", herald.Event{Name: "bid", Channel: channel, Data: "next"}); err != nil {
			t.Fatal(err)
		}
	}
	expectClosedBeforeAnyEvent(t, c1, "node 1's subscriber")
	poll.Until(t, patience, "the store to move to a new epoch", func() (bool, string) {
		page, err := n1.h.History(context.Background(), "app-id", channel, 0, 10)
		return err == nil && page.Latest.Epoch != old, page.Latest.Epoch
	})

	for i, nd := range []*node{n0, n1} {
		c, _ := dial(t, nd)
		events, _, rec := subscribeRecover(t, c, channel, &herald.Position{Epoch: old, Offset: 5})
		if len(events) != 0 || rec.Recovered == nil || *rec.Recovered || rec.Reason != cluster.ReasonEpochChanged || rec.Epoch == old {
			t.Fatalf("node %d: recovering from offset 5 of the old epoch: replayed %v, %+v; want nothing, recovered:false, epoch_changed, another epoch", i, events, rec)
		}
		d := "c" + strconv.Itoa(i)
		if err := nd.h.Publish("app-id", herald.Event{Name: "bid", Channel: channel, Data: d}); err != nil {
			t.Fatal(err)
		}
		m, err := c.Expect("pusher_internal:position", patience)
		if err != nil {
			t.Fatal(err)
		}
		p := decodePosition(t, m)
		if p.Epoch == old || p.Epoch == "" || (rec.Epoch != "" && (p.Epoch != rec.Epoch || p.Offset != rec.Offset+1)) {
			t.Fatalf("node %d: the next event at %+v after the recovery's %+v", i, p, rec)
		}
		if m, err := c.Expect("bid", patience); err != nil || m.DataString() != d {
			t.Fatalf("node %d: the next event %q, %v; want %q", i, m.DataString(), err, d)
		}
	}
}

// TestHistoryStoreLost: the store loses a channel's whole history (Redis's keys deleted,
// the JetStream stream deleted: a cut of files never synced), and the next publish starts a
// new epoch. A subscriber live through it, on each node, is closed with 4200 before the new
// epoch's first event reaches it, and its recovery from its old position answers
// recovered:false, epoch_changed.
func TestHistoryStoreLost(t *testing.T) {
	for name, en := range rollbackEngines(t) {
		t.Run(name, func(t *testing.T) {
			n0, _ := startEngineNode(t, en.engine, "node-0", func(herald.BusMessage) bool { return false }, historyApp)
			n1, _ := startEngineNode(t, en.engine, "node-1", func(herald.BusMessage) bool { return false }, historyApp)
			const channel = "auction-lost"
			c0, _ := join(t, n0, channel, "")
			c1, _ := join(t, n1, channel, "")
			publishN(t, n0.h, channel, 1, 3)
			readHistory(t, c0, 3, 1)
			readHistory(t, c1, 3, 1)
			page, err := n1.h.History(context.Background(), "app-id", channel, 0, 10)
			if err != nil || page.Latest.Offset != 3 {
				t.Fatalf("history before: %+v, %v", page.Latest, err)
			}
			old := page.Latest.Epoch
			en.lose(t)
			publishN(t, n1.h, channel, 4, 4)
			expectClosedBeforeAnyEvent(t, c0, "node 0's subscriber")
			expectClosedBeforeAnyEvent(t, c1, "node 1's subscriber")
			c, _ := dial(t, n0)
			events, _, rec := subscribeRecover(t, c, channel, &herald.Position{Epoch: old, Offset: 3})
			if len(events) != 0 || rec.Recovered == nil || *rec.Recovered || rec.Reason != cluster.ReasonEpochChanged || rec.Epoch == old {
				t.Fatalf("recovering from offset 3 of the old epoch: replayed %v, %+v; want nothing, recovered:false, epoch_changed", events, rec)
			}
			if rec.Epoch == "" || rec.Offset != 1 {
				t.Fatalf("recovery's position %+v: want the new epoch's offset 1", rec)
			}
		})
	}
}
