package brokertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// Node is one broker the suite asks a factory to build.
type Node struct {
	ID      string // the broker's node id
	Handler herald.BusHandler
	// RoundTrip is the broker's herald.BusObserver: the factory passes it to an engine that
	// makes round trips to a bus server, and the suite counts its calls to check that
	// concurrent Flushes share round trips.
	RoundTrip herald.BusObserver
	// QueueSize, when not 0, is the size the engine must give its receive queues (the
	// Losses case fills them).
	QueueSize int
}

// Cluster is what a factory returns: one connected broker per Node, in the same order, all
// on one bus. The factory closes them on test cleanup (Close is idempotent).
type Cluster struct {
	Brokers []herald.Broker
	// Stop and Start, when set, stop the bus server process and start it again on the same
	// address; Start returns once the server answers. They enable the outage cases.
	Stop, Start func(testing.TB)
}

// NewCluster builds a cluster of len(nodes) brokers on one bus.
type NewCluster func(t testing.TB, nodes []Node) Cluster

// Wait bounds every wait of the suite. It is generous: the machines that run it are shared.
const Wait = 20 * time.Second

// recorder keeps what one node's handler received, and counts the node's round trips.
type recorder struct {
	id    string
	trips atomic.Int64
	hold  chan struct{} // when set, the handler waits for it to close before a message of channel "held"
	mu    sync.Mutex
	msgs  []herald.BusMessage
	// drains counts the herald.BusDrained signals; undrained is how many messages arrived
	// since the last one.
	drains, undrained int
}

func (r *recorder) roundTrip(time.Duration) { r.trips.Add(1) }

func (r *recorder) handle(m herald.BusMessage) {
	if r.hold != nil && m.Channel == "held" {
		<-r.hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Kind == herald.BusDrained {
		r.drains++
		r.undrained = 0
		return
	}
	r.msgs = append(r.msgs, m)
	r.undrained++
}

// drained returns how many BusDrained signals r received, and how many messages since the
// last one.
func (r *recorder) drained() (drains, undrained int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drains, r.undrained
}

func (r *recorder) snapshot() []herald.BusMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]herald.BusMessage(nil), r.msgs...)
}

// on returns the messages received for channel.
func (r *recorder) on(channel string) []herald.BusMessage {
	var out []herald.BusMessage
	for _, m := range r.snapshot() {
		if m.Channel == channel {
			out = append(out, m)
		}
	}
	return out
}

// waitCount polls until r has received at least n messages on channel.
func (r *recorder) waitCount(t *testing.T, channel string, n int) []herald.BusMessage {
	t.Helper()
	var got []herald.BusMessage
	poll.Until(t, Wait, fmt.Sprintf("node %s to receive %d messages on %q", r.id, n, channel), func() (bool, string) {
		got = r.on(channel)
		return len(got) >= n, fmt.Sprintf("%d received (%s)", len(got), summary(got))
	})
	return got
}

func summary(ms []herald.BusMessage) string {
	if len(ms) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, m := range ms {
		if i == 3 {
			fmt.Fprintf(&b, ", ... %d more", len(ms)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		p := m.Payload
		if len(p) > 24 {
			p = p[:24]
		}
		fmt.Fprintf(&b, "%s/%s from %s: %q", m.App, m.Channel, m.Node, p)
	}
	return b.String()
}

// cluster is a started cluster with its recorders.
type cluster struct {
	Cluster
	rec []*recorder
}

func start(t testing.TB, newCluster NewCluster, n int) *cluster {
	return startWith(t, newCluster, n, 0, nil)
}

// startWith is start with the engines' receive queues of queueSize (0: their default), and
// hold, when set, in front of each node's handler for messages of channel "held".
func startWith(t testing.TB, newCluster NewCluster, n, queueSize int, hold chan struct{}) *cluster {
	t.Helper()
	c := &cluster{}
	nodes := make([]Node, n)
	for i := range nodes {
		r := &recorder{id: fmt.Sprintf("node%d", i), hold: hold}
		c.rec = append(c.rec, r)
		nodes[i] = Node{ID: r.id, Handler: r.handle, RoundTrip: r.roundTrip, QueueSize: queueSize}
	}
	c.Cluster = newCluster(t, nodes)
	if len(c.Brokers) != n {
		t.Fatalf("factory built %d brokers, want %d", len(c.Brokers), n)
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

func unsubscribe(t *testing.T, b herald.Broker, app, channel string) {
	t.Helper()
	ctx, cancel := ctxWait()
	defer cancel()
	if err := b.Unsubscribe(ctx, app, channel); err != nil {
		t.Fatalf("Unsubscribe(%q, %q): %v", app, channel, err)
	}
}

func flush(t *testing.T, b herald.Broker) {
	t.Helper()
	ctx, cancel := ctxWait()
	defer cancel()
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func publish(t *testing.T, b herald.Broker, app, channel, payload string) {
	t.Helper()
	m := herald.BusMessage{Kind: herald.BusEvent, App: app, Channel: channel, Payload: []byte(payload)}
	ctx, cancel := ctxWait()
	defer cancel()
	if err := b.Publish(ctx, m); err != nil {
		t.Fatalf("Publish(%q, %q, %q): %v", app, channel, payload, err)
	}
}
