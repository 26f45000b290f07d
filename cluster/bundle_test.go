package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// spy records what the bus brings for one channel, a bundle read into its frames.
type spy struct {
	mu      sync.Mutex
	kinds   []herald.BusKind
	frames  []string
	bundles int
}

func (s *spy) receive(m herald.BusMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds = append(s.kinds, m.Kind)
	switch m.Kind {
	case herald.BusEvent:
		s.frames = append(s.frames, string(m.Payload))
	case herald.BusBundle:
		s.bundles++
		eachBundled(m.Payload, func(_ []byte, _ int64, frame []byte) { s.frames = append(s.frames, string(frame)) })
	}
}

func (s *spy) take() (frames []string, bundles int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	frames, bundles = s.frames, s.bundles
	s.frames, s.bundles, s.kinds = nil, 0, nil
	return frames, bundles
}

// startNode starts a replicated node on bus; legacy makes it write its state stream as
// v0.1.0 does (no node record: no version, no features).
func startNode(t *testing.T, bus *memory.Bus, id string, legacy bool) (*Replicated, *App) {
	t.Helper()
	eng := fanout.New(fanout.Config{Workers: 1}, nil)
	t.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	b := bus.Attach(memory.Config{NodeID: id}, mux.Receive)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	r := NewReplicated(Config{Heartbeat: 50 * time.Millisecond, NodeTimeout: 2 * time.Second, Release: "test-" + id}, eng, b, nil, mux.Handle, nil)
	if legacy {
		r.stream.writeLegacy()
	}
	a := r.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), nil)
	r.Start(nopListener{})
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r, a
}

// writeLegacy makes the stream write its batches as v0.1.0 does: no node record, no features.
func (s *stream) writeLegacy() { s.send.legacy, s.peers.reads = true, 0 }

// TestBundlesOnlyWhenEveryNodeReadsThem: a node sends one publish call's events of a channel
// as one bundle only while every live node announces that it reads bundles: with a node of
// v0.1.0 (announcing nothing) on the bus it sends one message per event, once that node is
// gone a bundle, and when such a node joins again it falls back. Every event arrives, in
// order, either way.
func TestBundlesOnlyWhenEveryNodeReadsThem(t *testing.T) {
	bus := memory.NewBus()
	var sp spy
	watcher := bus.Attach(memory.Config{NodeID: "spy"}, sp.receive)
	t.Cleanup(func() { _ = watcher.Close(context.Background()) })
	for _, ch := range []string{"market", "news"} {
		if err := watcher.Subscribe(t.Context(), "app", ch); err != nil {
			t.Fatal(err)
		}
	}
	a, app := startNode(t, bus, "new-a", false)
	old, _ := startNode(t, bus, "old-b", true)
	knows := func(r *Replicated, ids ...string) func() (bool, string) {
		return func() (bool, string) {
			var got []string
			for _, n := range r.Nodes()[1:] {
				got = append(got, fmt.Sprintf("%s:v%d:%v", n.ID, n.StateVersion, n.Features.Names()))
			}
			want := ids
			ok := len(got) == len(want)
			for i := range want {
				ok = ok && i < len(got) && got[i][:len(want[i])] == want[i]
			}
			return ok, fmt.Sprint(got)
		}
	}
	poll.Until(t, 10*time.Second, "new-a hears old-b", knows(a, "old-b:v1:[]"))

	// Ten events on market, or in round 5 four, one on news and five: two bundles, each
	// channel's events and the call's in order.
	publish := func(round int) []string {
		t.Helper()
		var evs []herald.Event
		var frames [][]byte
		var want []string
		for i := range 10 {
			ch := "market"
			if round == 5 && i == 4 {
				ch = "news"
			}
			evs = append(evs, herald.Event{Name: "tick", Channel: ch})
			f := fmt.Sprintf("round %d event %d", round, i)
			frames, want = append(frames, []byte(f)), append(want, f)
		}
		if err := a.PublishBatch(app, evs, frames); err != nil {
			t.Fatal(err)
		}
		return want
	}
	await := func(want []string, bundles int) {
		t.Helper()
		var got []string
		var n int
		poll.Until(t, 10*time.Second, "the spy gets every event", func() (bool, string) {
			f, b := sp.take()
			got, n = append(got, f...), n+b
			return len(got) >= len(want), fmt.Sprint(len(got), " events")
		})
		if !slices.Equal(got, want) || n != bundles {
			t.Fatalf("got %d bundles with %q, want %d with %q", n, got, bundles, want)
		}
	}

	if a.Features()&FeatureBundles != 0 {
		t.Fatal("bundles in use while a node of v0.1.0 is up")
	}
	await(publish(1), 0)
	if st := a.Stats(); st.BundlesSent != 0 {
		t.Fatalf("%d bundles sent while a node of v0.1.0 is up", st.BundlesSent)
	}

	old.Stop(context.Background()) // says goodbye: dropped at once
	poll.Until(t, 10*time.Second, "bundles in use once the old node is gone", func() (bool, string) {
		return a.Features()&FeatureBundles != 0, fmt.Sprint(a.Nodes())
	})
	await(publish(2), 1)
	if st := a.Stats(); st.BundlesSent != 1 || st.BundledEvents != 10 {
		t.Fatalf("stats %+v, want 1 bundle of 10 events", st)
	}

	b, _ := startNode(t, bus, "new-b", false) // another new node: still bundles
	poll.Until(t, 10*time.Second, "new-a hears new-b", knows(a, "new-b:v2:[bundles keys]"))
	await(publish(3), 1)
	if b.Stats().BundlesReceived != 0 {
		t.Fatal("new-b has no interest in the channel, yet received a bundle")
	}
	await(publish(5), 2)

	startNode(t, bus, "old-c", true) // an old node joins again: back to one message per event
	poll.Until(t, 10*time.Second, "new-a hears old-c", knows(a, "new-b:v2:[bundles keys]", "old-c:v1:[]"))
	if a.Features()&FeatureBundles != 0 {
		t.Fatal("bundles still in use with a node of v0.1.0 up")
	}
	await(publish(4), 0)
}

// TestBundleWire: a bundle's payload reads back into its events in order; a payload cut
// short or empty delivers nothing.
func TestBundleWire(t *testing.T) {
	var p []byte
	p = appendBundled(p, "1.2", 42, []byte("one"))
	p = appendBundled(p, "", 0, []byte("two"))
	var got []string
	if !eachBundled(p, func(ex []byte, origin int64, frame []byte) {
		got = append(got, fmt.Sprintf("%s/%d/%s", ex, origin, frame))
	}) || !slices.Equal(got, []string{"1.2/42/one", "/0/two"}) {
		t.Fatalf("read back %q", got)
	}
	for _, bad := range [][]byte{nil, p[:len(p)-1], append(slices.Clone(p), 0x80)} {
		n := 0
		if eachBundled(bad, func([]byte, int64, []byte) { n++ }) || n != 0 {
			t.Errorf("payload %q: read, %d events delivered", bad, n)
		}
	}
}

// TestStateStreamVersions: a batch of version 2 ends with the node record, which a reader
// of version 1 (v0.1.0: it stops at the first record it does not know) meets only after
// every other record; a batch whose node record says a later version is refused, counted.
func TestStateStreamVersions(t *testing.T) {
	b := appendStateHeader(nil, stateHeader{epoch: 7, seq: 1})
	b = appendStateRecord(b, stateRecord{op: recSubs, app: "app", channel: "c", subs: 3})
	b = appendNodeRecord(b, nodeRecord{version: 2, features: FeatureBundles, release: "v9"})
	r := stateReader{b: b}
	r.header()
	var ops []byte
	for {
		rec, ok := r.next()
		if !ok {
			break
		}
		ops = append(ops, rec.op)
	}
	if r.err != nil || !slices.Equal(ops, []byte{recSubs, recNode}) {
		t.Fatalf("records %v, err %v", ops, r.err)
	}
	r = stateReader{b: b}
	r.header()
	n, found, err := batchNode(r)
	if err != nil || !found || n != (nodeRecord{version: 2, features: FeatureBundles, release: "v9"}) {
		t.Fatalf("node record %+v %v %v", n, found, err)
	}
	// What v0.1.0's reader does with it: the records before the node record are read.
	v1 := func(b []byte) (ops []byte) {
		r := stateReader{b: b}
		r.header()
		for r.err == nil && len(r.b) > 0 {
			op := r.byte()
			r.string()
			r.string()
			switch op {
			case recSubs:
				r.uvarint()
			default:
				r.err = errStateMalformed
				continue
			}
			ops = append(ops, op)
		}
		return ops
	}
	if got := v1(b); !slices.Equal(got, []byte{recSubs}) {
		t.Fatalf("a version 1 reader read %v", got)
	}

	bus := memory.NewBus()
	a, _ := startNode(t, bus, "a", false)
	later := appendStateHeader(nil, stateHeader{epoch: 9, seq: 1, flags: flagSnapStart | flagSnapEnd})
	later = appendStateRecord(later, stateRecord{op: recSubs, app: "app", channel: "c", subs: 3})
	later = appendNodeRecord(later, nodeRecord{version: stateVersion + 1})
	a.receiveState(herald.BusMessage{Kind: herald.BusState, Node: "future", Payload: later})
	if st := a.Stats(); st.StateRefused != 1 || len(a.Nodes()) != 1 || a.stream.remoteSubs("app", "c") != 0 {
		t.Fatalf("a later version's batch: stats %+v, nodes %+v, remote subs %d", st, a.Nodes(), a.stream.remoteSubs("app", "c"))
	}
}

// versionBus is a bus whose Stats report messages of an unknown envelope version.
type versionBus struct {
	herald.Broker
	unknown atomic.Uint64
}

func (b *versionBus) Stats() herald.BrokerStats {
	st := b.Broker.Stats()
	st.UnknownVersion = b.unknown.Load()
	if st.UnknownVersion > 0 {
		st.LastUnknownVersion = herald.WireVersionSeen{Node: "node-9", Version: 7}
	}
	return st
}

// syncBuffer is a log's output, safe for the node's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnknownVersionsLogged: what a node refuses for its version, bus messages (counted by the
// bus) and state batches, is logged with the sender's node id and the version, once however
// many arrive within the interval.
func TestUnknownVersionsLogged(t *testing.T) {
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	eng := fanout.New(fanout.Config{Workers: 1}, nil)
	t.Cleanup(eng.Stop)
	mux := new(broker.Mux)
	bus := &versionBus{Broker: memory.New(memory.Config{NodeID: "a"}, mux.Receive)}
	t.Cleanup(func() { _ = bus.Close(context.Background()) })
	r := NewReplicated(Config{Heartbeat: 20 * time.Millisecond, NodeTimeout: time.Second}, eng, bus, nil, mux.Handle, log)
	r.AddApp("app", eng.NewGroup("app", fanout.Latencies{}), nil)
	r.Start(nopListener{})
	t.Cleanup(func() { r.Stop(context.Background()) })

	bus.unknown.Store(3)
	later := appendStateHeader(nil, stateHeader{epoch: 9, seq: 1})
	later = appendNodeRecord(later, nodeRecord{version: stateVersion + 5})
	for range 3 {
		r.receiveState(herald.BusMessage{Kind: herald.BusState, Node: "node-8", Payload: later})
	}
	poll.Until(t, 10*time.Second, "both warnings", func() (bool, string) {
		s := out.String()
		return strings.Contains(s, "unknown wire version refused") && strings.Contains(s, "node_id=node-9 version=7") &&
			strings.Contains(s, "state stream batch of an unknown version refused") && strings.Contains(s, "node_id=node-8 version=7"), s
	})
	if n := strings.Count(out.String(), "state stream batch of an unknown version"); n != 1 || r.Stats().StateRefused != 3 {
		t.Fatalf("%d warnings for 3 refused batches (counted %d), want 1:\n%s", n, r.Stats().StateRefused, out.String())
	}
}
