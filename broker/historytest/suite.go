package historytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// Node is one node the suite asks a factory to build.
type Node struct {
	ID      string            // the broker's node id
	Handler herald.BusHandler // what the node's broker receives
}

// Cluster is what a factory returns: one connected broker per Node, in the same order, all
// on one bus, and beside each the History built on it, all on one history store. The
// factory closes them on test cleanup.
type Cluster struct {
	Brokers   []herald.Broker
	Histories []herald.History
	// Reopen builds a new History beside node i's broker, on the same store: what a node
	// that restarts while the store keeps its data gets.
	Reopen func(t testing.TB, i int) herald.History
	// Lose loses every channel's history in the store, as a flushed Redis or a deleted
	// stream would.
	Lose func(t testing.TB)
	// Ordered says that every node receives one channel's events in offset order, whichever
	// node published them (memory, Redis); without it only one node's own publishes of a
	// channel are received in its order (NATS).
	Ordered bool
	// KeysPerNode says that the engine's History keeps idempotency keys on each node only,
	// not across nodes (NATS streams of several replicas on nats-server before 2.11): the
	// Keys case then checks only that keyed events are kept like the others.
	KeysPerNode bool
	// OffsetIDs says that the engine's History gives each event its channel and offset as a
	// message ID that the store remembers for a window (NATS streams of several replicas):
	// a channel whose epoch was ended (Restart) cannot be given its old epoch's offsets again
	// while the store remembers them, and the Restart case does not publish after it.
	OffsetIDs bool
	// Stop and Start, when set, stop the bus server and start it again on the same address
	// (Start returns once it answers). Without them the case of a bus that is down closes
	// node 0's broker instead.
	Stop, Start func(testing.TB)
}

// NewCluster builds a cluster of len(nodes) nodes on one bus and one history store.
type NewCluster func(t testing.TB, nodes []Node) Cluster

// Wait bounds every wait of the suite. It is generous: the machines that run it are shared.
const Wait = 20 * time.Second

// Run runs every case of the contract against clusters built by newCluster; the case of a
// bus that is down runs last.
func Run(t *testing.T, newCluster NewCluster) {
	cases := []struct {
		name string
		fn   func(*testing.T, NewCluster)
	}{
		{"Offsets", testOffsets},
		{"ConcurrentNodes", testConcurrentNodes},
		{"Read", testRead},
		{"Size", testSize},
		{"TTL", testTTL},
		{"EpochStable", testEpochStable},
		{"EpochLost", testEpochLost},
		{"Restart", testRestart},
		{"Isolation", testIsolation},
		{"ChannelNames", testChannelNames},
		{"Invalid", testInvalid},
		{"Keys", testKeys},
		{"Down", testDown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newCluster) })
	}
}

// rule is the history rule of most cases: generous, so only the cases about limits meet them.
var rule = herald.HistoryRule{Channels: "*", Size: 1000, TTL: time.Hour}

// recorder keeps what one node's broker received.
type recorder struct {
	id   string
	mu   sync.Mutex
	msgs []herald.BusMessage
}

func (r *recorder) handle(m herald.BusMessage) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

// on returns the messages received for (app, channel).
func (r *recorder) on(app, channel string) []herald.BusMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []herald.BusMessage
	for _, m := range r.msgs {
		if m.App == app && m.Channel == channel {
			out = append(out, m)
		}
	}
	return out
}

// waitCount polls until r has received at least n messages on (app, channel).
func (r *recorder) waitCount(t *testing.T, app, channel string, n int) []herald.BusMessage {
	t.Helper()
	var got []herald.BusMessage
	poll.Until(t, Wait, fmt.Sprintf("node %s to receive %d messages on %s/%s", r.id, n, app, channel), func() (bool, string) {
		got = r.on(app, channel)
		return len(got) >= n, fmt.Sprintf("%d received", len(got))
	})
	return got
}

// cluster is a started cluster with its recorders.
type cluster struct {
	Cluster
	rec []*recorder
}

func start(t testing.TB, newCluster NewCluster, n int) *cluster {
	t.Helper()
	c := &cluster{}
	nodes := make([]Node, n)
	for i := range nodes {
		r := &recorder{id: fmt.Sprintf("node%d", i)}
		c.rec = append(c.rec, r)
		nodes[i] = Node{ID: r.id, Handler: r.handle}
	}
	c.Cluster = newCluster(t, nodes)
	if len(c.Brokers) != n || len(c.Histories) != n {
		t.Fatalf("factory built %d brokers and %d histories, want %d of each", len(c.Brokers), len(c.Histories), n)
	}
	return c
}

func ctxWait() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), Wait)
}

func subscribe(t *testing.T, b herald.Broker, app, channel string) {
	t.Helper()
	ctx, cancel := ctxWait()
	defer cancel()
	if err := b.Subscribe(ctx, app, channel); err != nil {
		t.Fatalf("Subscribe(%q, %q): %v", app, channel, err)
	}
}

func event(app, channel, payload string) herald.BusMessage {
	return herald.BusMessage{Kind: herald.BusEvent, App: app, Channel: channel, Payload: []byte(payload)}
}

// publish publishes msg through h under r and returns the position given.
func publish(t testing.TB, h herald.History, r herald.HistoryRule, msg herald.BusMessage) herald.Position {
	t.Helper()
	ctx, cancel := ctxWait()
	defer cancel()
	p, err := h.Publish(ctx, r, msg)
	if err != nil {
		t.Fatalf("Publish(%s/%s, %q): %v", msg.App, msg.Channel, msg.Payload, err)
	}
	if p.Offset == 0 || p.Epoch == "" {
		t.Fatalf("Publish(%s/%s, %q) gave position %+v; want a non-empty epoch and an offset", msg.App, msg.Channel, msg.Payload, p)
	}
	return p
}

func read(t testing.TB, h herald.History, r herald.HistoryRule, app, channel string, after uint64, limit int) herald.HistoryPage {
	t.Helper()
	ctx, cancel := ctxWait()
	defer cancel()
	p, err := h.Read(ctx, r, app, channel, after, limit)
	if err != nil {
		t.Fatalf("Read(%s/%s, after %d, limit %d): %v", app, channel, after, limit, err)
	}
	return p
}

// checkEntries fails t unless page's entries are the offsets from..to (consecutive, oldest
// first) with the payloads want gives for them.
func checkEntries(t testing.TB, what string, page herald.HistoryPage, from, to uint64, want func(uint64) string) {
	t.Helper()
	var n uint64
	if to >= from {
		n = to - from + 1
	}
	if uint64(len(page.Entries)) != n {
		t.Fatalf("%s: %d entries (%s), want offsets %d..%d", what, len(page.Entries), offsets(page), from, to)
	}
	for i, e := range page.Entries {
		o := from + uint64(i)
		if e.Offset != o || string(e.Frame) != want(o) {
			t.Fatalf("%s: entry %d is offset %d %q, want offset %d %q (entries %s)", what, i, e.Offset, e.Frame, o, want(o), offsets(page))
		}
	}
}

func offsets(page herald.HistoryPage) string {
	if len(page.Entries) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d..%d", page.Entries[0].Offset, page.Entries[len(page.Entries)-1].Offset)
}
