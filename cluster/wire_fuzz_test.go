package cluster

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/ws"
)

// stateSeeds are well-formed batches of every kind, and a few that are not.
func stateSeeds() [][]byte {
	rec := func(h stateHeader, recs ...stateRecord) []byte {
		b := appendStateHeader(nil, h)
		for _, r := range recs {
			b = appendStateRecord(b, r)
		}
		return b
	}
	return [][]byte{
		rec(stateHeader{epoch: 7, seq: 1, flags: flagSnapStart | flagSnapEnd},
			stateRecord{op: recSubs, app: "app", channel: "room", subs: 3, fired: true},
			stateRecord{op: recMember, app: "app", channel: "presence-room", user: "u1", present: true, info: []byte(`{"n":1}`)},
			stateRecord{op: recMember, app: "app", channel: usersChannel, user: "alice", present: true}),
		rec(stateHeader{epoch: 7, seq: 2}, stateRecord{op: recMember, app: "app", channel: "presence-room", user: "u1"}),
		rec(stateHeader{epoch: 7, seq: 3, flags: flagSyncOne, target: "42"}),
		rec(stateHeader{epoch: 7, seq: 4}, stateRecord{op: recCache, app: "app", channel: "cache-x", target: "42", age: 5, info: []byte("frame")}),
		rec(stateHeader{epoch: 7, seq: 5, flags: flagBye}),
		rec(stateHeader{epoch: 9, seq: 1, flags: flagSyncAll | flagWantCache}),
		{}, {0x80}, {1, 1, 0, 9}, {1, 1, 0, recSubs, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
}

// FuzzStateStream feeds arbitrary bytes to the state stream's decoder and to a live node as
// another node's batch: the decoder never panics and what it decodes encodes back to the
// same records; the node never panics, and its books stay sound (no count at or below zero,
// no member held by no node).
func FuzzStateStream(f *testing.F) {
	for _, s := range stateSeeds() {
		f.Add(s)
	}
	r := fuzzNode(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := stateReader{b: data}
		h := rd.header()
		var recs []stateRecord
		for {
			rec, ok := rd.next()
			if !ok {
				break
			}
			recs = append(recs, rec)
		}
		if rd.err == nil {
			again := stateReader{b: appendStateRecords(appendStateHeader(nil, h), recs)}
			if h2 := again.header(); !reflect.DeepEqual(h2, h) {
				t.Fatalf("header %+v encodes back as %+v", h, h2)
			}
			for i := range recs {
				rec, ok := again.next()
				if !ok || !sameRecord(rec, recs[i]) {
					t.Fatalf("record %d %+v encodes back as %+v (%v)", i, recs[i], rec, again.err)
				}
			}
		}
		r.stream.receive("fuzzer", data)
		checkBooks(t, r)
	})
}

func appendStateRecords(b []byte, recs []stateRecord) []byte {
	for _, r := range recs {
		b = appendStateRecord(b, r)
	}
	return b
}

// sameRecord compares what a record carries on the wire: a record of another node's member
// that is not present carries no info.
func sameRecord(a, b stateRecord) bool {
	if a.op == recMember && !a.present {
		a.info, b.info = nil, nil
	}
	if len(a.info) == 0 && len(b.info) == 0 {
		a.info, b.info = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// checkBooks checks the node's copy of the others' shares.
func checkBooks(t *testing.T, r *Replicated) {
	s := r.stream.peers
	s.mu.Lock()
	for k, n := range s.totals {
		if n <= 0 {
			t.Fatalf("the others' count of %v is %d", k, n)
		}
	}
	s.mu.Unlock()
	for _, a := range r.appList() {
		a.table.pres.each("", func(name string, p *presence) {
			p.mu.Lock()
			defer p.mu.Unlock()
			for user, m := range p.remote {
				if m.nodes <= 0 {
					t.Fatalf("%s: remote member %s held by %d nodes", name, user, m.nodes)
				}
			}
		})
	}
}

// fuzzNode is a started Replicated node of app "app", alone on a memory bus.
func fuzzNode(tb testing.TB) *Replicated { return fuzzNodeWith(tb, Config{}) }

// fuzzNodeWith is fuzzNode configured with cfg.
func fuzzNodeWith(tb testing.TB, cfg Config) *Replicated {
	eng := fanout.New(fanout.Config{Workers: 1, Ping: []byte("p"), Slow: fanout.Close{Frame: []byte("s")}, PongLost: fanout.Close{Frame: []byte("l")}}, nil)
	tb.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	b := memory.NewBus().Attach(memory.Config{NodeID: "fuzzed"}, mux.Receive)
	tb.Cleanup(func() { _ = b.Close(context.Background()) })
	r := NewReplicated(cfg, eng, b, nil, mux.Handle, nil)
	r.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), nil)
	r.Start(nopListener{})
	tb.Cleanup(func() { r.Stop(context.Background()) })
	return r
}

// FuzzBusPayloads feeds arbitrary payloads to a live node as the other kinds of messages the
// bus brings (an event, a cache channel's event, a terminate request), with the frame check a
// node runs with (ws.ValidTextFrame): the node never panics, and the check sees every event
// frame before it could be delivered or kept.
func FuzzBusPayloads(f *testing.F) {
	frame := []byte("\x81\x05hello")
	f.Add(frame, byte(herald.BusEvent))
	f.Add(appendString(appendString(nil, "app"), "cache-x"), byte(herald.BusCache))
	f.Add(append(appendString(appendString(nil, "app"), "cache-x"), frame...), byte(herald.BusCache))
	f.Add(appendString(appendString(nil, "app"), "u1"), byte(herald.BusTerminate))
	f.Add([]byte{0x88, 0x02, 0x03, 0xe8}, byte(herald.BusEvent))
	var checked []byte
	r := fuzzNodeWith(f, Config{ValidFrame: func(b []byte) bool { checked = b; return ws.ValidTextFrame(b) }})
	f.Fuzz(func(t *testing.T, payload []byte, kind byte) {
		checked = nil
		msg := herald.BusMessage{App: "app", Channel: "room", Node: "other", Payload: payload}
		switch kind % 3 {
		case 0:
			msg.Kind = herald.BusEvent
			r.receiveEvent(msg)
			if !bytes.Equal(checked, payload) {
				t.Fatalf("the event's frame %q was not checked", payload)
			}
		case 1:
			msg.Kind, msg.Channel = herald.BusCache, "cache"
			r.receiveCache(msg)
		case 2:
			msg.Kind, msg.Channel = herald.BusTerminate, "control"
			r.receiveTerminate(msg)
		}
		checkBooks(t, r)
	})
}

type nopListener struct{}

func (nopListener) Wants(string, herald.ActivityKind) bool                        { return true }
func (nopListener) Emit(string, *herald.Activity)                                 {}
func (nopListener) CountChanged(string, string)                                   {}
func (nopListener) MemberAdded(string, *Channel, herald.Member)                   {}
func (nopListener) MemberRemoved(string, *Channel, string)                        {}
func (nopListener) RemoteUser(string, string, bool)                               {}
func (nopListener) Terminate(string, string)                                      {}
func (nopListener) AppendPosition(dst []byte, _ string, _ herald.Position) []byte { return dst }
func (nopListener) Lost(string, *Channel)                                         {}
func (nopListener) Missed(string, *Channel)                                       {}
