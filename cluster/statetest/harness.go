package statetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
)

// Node is what the suite gives the factory for each node it wants.
type Node struct {
	ID     string         // unique in the cluster
	Engine *fanout.Engine // the node's fan-out engine: its State delivers through it
}

// NewCluster builds one State per node, sharing what the implementation shares (a bus), not
// yet started. Called again in the same test, it builds nodes of the same cluster (a node
// that joins later). An implementation that cannot form a cluster calls t.Skip when asked for
// more than one node.
type NewCluster func(t testing.TB, nodes []Node) []cluster.State

// Wait bounds every wait for a cluster to settle: generous, for busy machines.
var Wait = 20 * time.Second

// appID is the one app every node serves.
const appID = "app"

// node is one node of a cluster under test.
type node struct {
	id  string
	st  cluster.State
	eng *fanout.Engine
	g   *fanout.Group
	app *cluster.App
	l   *recorder
}

// start builds and starts a cluster of n nodes.
func start(t *testing.T, nc NewCluster, n int) []*node {
	t.Helper()
	return startMore(t, nc, 0, n)
}

// startMore builds and starts n more nodes of the test's cluster, numbered from first.
func startMore(t *testing.T, nc NewCluster, first, n int) []*node {
	t.Helper()
	spec := make([]Node, n)
	for i := range spec {
		eng := fanout.New(fanout.Config{Workers: 2, Ping: []byte("ping\n"),
			Slow: fanout.Close{Code: 4100, Frame: []byte("slow\n")}, PongLost: fanout.Close{Code: 4201, Frame: []byte("pong\n")}}, nil)
		t.Cleanup(eng.Stop) // after the State's Stop, registered later
		spec[i] = Node{ID: "node-" + strconv.Itoa(first+i), Engine: eng}
	}
	states := nc(t, spec)
	if len(states) != n {
		t.Fatalf("the factory built %d states for %d nodes", len(states), n)
	}
	nodes := make([]*node, n)
	for i, st := range states {
		nd := &node{id: spec[i].ID, st: st, eng: spec[i].Engine, l: newRecorder()}
		nd.g = nd.eng.NewGroup(appID, fanout.Latencies{})
		nd.app = st.AddApp(appID, nd.g, nil)
		if nd.app.ID() != appID {
			t.Fatalf("AddApp(%q) returned app %q", appID, nd.app.ID())
		}
		st.Start(nd.l)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), Wait)
			defer cancel()
			st.Stop(ctx)
		})
		nodes[i] = nd
	}
	return nodes
}

// client is a connection of a node: what its transport received, one frame a line.
type client struct {
	c  fanout.Conn
	tr *recTransport
}

// connect attaches a new client to nd.
func (nd *node) connect() *client {
	cl := &client{tr: &recTransport{}}
	nd.eng.Claim()
	nd.g.Claim()
	nd.eng.Init(&cl.c, nd.g)
	nd.eng.Attach(&cl.c, cl.tr)
	return cl
}

// subscribe does what the session does for a subscription: acquire the channel, report the
// count, wait at the gate, then enter cl (its worker sends "sub:<name>" first).
func (nd *node) subscribe(t *testing.T, cl *client, name string) *cluster.Channel {
	t.Helper()
	ch := nd.acquire(t, name)
	nd.eng.Subscribe(&cl.c, &ch.Channel, []byte("sub:"+name+"\n"), nil)
	return ch
}

// acquire is subscribe up to the gate, which it waits for: the caller enters a client.
func (nd *node) acquire(t *testing.T, name string) *cluster.Channel {
	t.Helper()
	ch, first := nd.st.Acquire(nd.app, name, herald.Classify(name))
	nd.st.Counted(nd.app, name, first, false)
	w := &waiter{entered: make(chan struct{})}
	if ch.Gate().Wait(w) {
		select {
		case <-w.entered:
		case <-time.After(Wait):
			t.Fatalf("%s: the gate of %s did not open within %v", nd.id, name, Wait)
		}
	}
	return ch
}

// unsubscribe undoes subscribe.
func (nd *node) unsubscribe(cl *client, ch *cluster.Channel) {
	nd.eng.Unsubscribe(&cl.c, &ch.Channel)
	last := nd.st.Release(nd.app, ch)
	nd.st.Counted(nd.app, ch.Name(), last, false)
}

// publish publishes data on channel as event name through nd; it must succeed.
func (nd *node) publish(t *testing.T, channel, data string) {
	t.Helper()
	if err := nd.st.Publish(nd.app, herald.Event{Name: "e", Channel: channel, Data: data}, []byte(channel+":"+data+"\n")); err != nil {
		t.Fatalf("%s: publish %s on %s: %v", nd.id, data, channel, err)
	}
}

// waiter is a subscription waiting at a gate: it enters when the gate opens.
type waiter struct{ entered chan struct{} }

func (w *waiter) Enter() bool { close(w.entered); return true }
func (w *waiter) Refused()    {}

// recTransport keeps every byte written to it.
type recTransport struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recTransport) Writev(bufs [][]byte) (int, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range bufs {
		r.buf.Write(b)
		n += len(b)
	}
	return n, false, nil
}
func (r *recTransport) Shutdown()    {}
func (r *recTransport) Close() error { return nil }

// lines returns the frames received, in order.
func (r *recTransport) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.TrimSuffix(r.buf.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// with returns the frames received that start with prefix, in order.
func (cl *client) with(prefix string) []string {
	var out []string
	for _, l := range cl.tr.lines() {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// expect waits until cl has received exactly want among the frames that start with prefix.
func (cl *client) expect(t *testing.T, what, prefix string, want ...string) {
	t.Helper()
	poll.Until(t, Wait, what, func() (bool, string) {
		got := cl.with(prefix)
		return slices.Equal(got, want), fmt.Sprintf("got %q, want %q", got, want)
	})
}

// recorder is a Listener that keeps what it is told.
type recorder struct {
	mu         sync.Mutex
	events     []string // "added <channel> <user>", "removed ...", "user <user> <present>", "terminate <user>", "emit <kind> <channel> <user>"
	counts     map[string]int
	wantsKinds herald.ActivitySet
}

func newRecorder() *recorder { return &recorder{counts: map[string]int{}} }

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) Wants(_ string, k herald.ActivityKind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wantsKinds.Has(k)
}

func (r *recorder) Emit(_ string, act *herald.Activity) {
	r.add("emit " + act.Kind.String() + " " + act.Channel + " " + act.UserID)
}

func (r *recorder) CountChanged(_ string, channel string) {
	r.mu.Lock()
	r.counts[channel]++
	r.mu.Unlock()
}

func (r *recorder) MemberAdded(_ string, ch *cluster.Channel, m herald.Member) {
	r.add("added " + ch.Name() + " " + m.UserID)
}

func (r *recorder) MemberRemoved(_ string, ch *cluster.Channel, user string) {
	r.add("removed " + ch.Name() + " " + user)
}

func (r *recorder) RemoteUser(_ string, user string, present bool) {
	r.add("user " + user + " " + strconv.FormatBool(present))
}

func (r *recorder) Terminate(_ string, user string) { r.add("terminate " + user) }

func (r *recorder) AppendPosition(dst []byte, channel string, p herald.Position) []byte {
	return fmt.Appendf(dst, "position %s %s %d;", channel, p.Epoch, p.Offset)
}

func (r *recorder) Lost(_ string, ch *cluster.Channel) { r.add("lost " + ch.Name()) }

func (r *recorder) Missed(_ string, ch *cluster.Channel) { r.add("missed " + ch.Name()) }

// seen returns what the recorder was told that starts with prefix.
func (r *recorder) seen(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// expect waits until the recorder was told exactly want among what starts with prefix.
func (r *recorder) expect(t *testing.T, what, prefix string, want ...string) {
	t.Helper()
	poll.Until(t, Wait, what, func() (bool, string) {
		got := r.seen(prefix)
		return slices.Equal(got, want), fmt.Sprintf("got %q, want %q", got, want)
	})
}

// noMeasure observes nothing.
var noMeasure fanout.Measure
