package bench

import (
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/session"
)

// startHistory serves a real herald whose app keeps the last size events of every channel
// named recover*, with wrap (when not nil) in front of its API.
func startHistory(t *testing.T, size int, wrap func(http.Handler) http.Handler) Target {
	t.Helper()
	app := testApp
	app.History = []herald.HistoryRule{{Channels: "recover*", Size: size, TTL: time.Hour}}
	target, _ := startNodeOf(t, app, session.Config{MaxConnections: 1000}, wrap, nil, "")
	return target
}

// TestRecover: 20 clients on 2 history channels miss 10 events each during an outage, with live
// events published while they reconnect: every client recovers every missed event once, in
// order, with positions that follow, and the live events go on.
func TestRecover(t *testing.T) {
	target := startHistory(t, 1000, nil)
	rep, err := Recover(t.Context(), RecoverConfig{Target: target, Clients: 20, Channels: 2, Outage: 200 * time.Millisecond,
		Events: 10, Before: 2, After: 2, LiveInterval: 5 * time.Millisecond, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	rc := rep.Recovery
	if rc.Recovered != 20 || rc.Failed != 0 || !rc.Complete || rc.AllSeconds <= 0 || rc.PositionErrors != 0 || rc.LateEvents != 0 {
		t.Fatalf("recovery %+v; want all 20 recovered, nothing out of place", rc)
	}
	if rc.Replayed < 20*10 || rep.Positioned != 20 || rep.Reconnect.Established != 20 || rep.Outage.Published != 10 || rep.Outage.Failed != 0 {
		t.Fatalf("replayed %d, positioned %d, reconnect %+v, outage %+v; want 200 replayed at least, every client back",
			rc.Replayed, rep.Positioned, rep.Reconnect, rep.Outage)
	}
	total := int64(2 + 10 + rep.LivePublished + 2)
	if d := rep.Delivery; d.Expected != 20*total || d.Delivered != d.Expected || !d.Clean() {
		t.Fatalf("delivery %+v; want every client to have all %d events of its channel once, in order", d, total)
	}
	if rep.Latency.Count != 20 || rep.LatencyFromStart.Count != 20 || rep.Latency.MaxMs > rc.AllSeconds*1000+1 || rep.Lost.Count != 0 {
		t.Fatalf("latency %+v, from start %+v, all back in %v s, lost %+v", rep.Latency, rep.LatencyFromStart, rc.AllSeconds, rep.Lost)
	}
	if u := rep.ServerUsage; u == nil || u.CPUSeconds < 0 || u.RSSBytes <= 0 {
		t.Fatalf("server usage %+v; want CPU and RSS", u)
	}
	if !rep.Clean() {
		t.Fatalf("report not clean: %+v", rep)
	}
	checkText(t, rep, "recovered    20 of 20, 0 failed", "all back     in", "0 position errors", "per replayed event")
	checkJSON(t, rep, "latency_from_start")
}

// TestRecoverTwoNodes: on two nodes of a cluster whose bus keeps the history, clients recover
// on their own node and on the other one; with no event before the outage, they recover from
// the channel's empty epoch.
func TestRecoverTwoNodes(t *testing.T) {
	app := testApp
	app.History = []herald.HistoryRule{{Channels: "recover*", Size: 1000, TTL: time.Hour}}
	bus := memory.NewBus()
	a, _ := startNodeOf(t, app, session.Config{MaxConnections: 1000}, nil, bus, "a")
	b, _ := startNodeOf(t, app, session.Config{MaxConnections: 1000}, nil, bus, "b")
	target := a
	target.WS = a.WS + "," + b.WS
	target.ServerPIDs = []int{os.Getpid(), os.Getpid()}
	for _, c := range []RecoverConfig{
		{Clients: 10, Events: 10, Before: 2, After: 2},
		{Clients: 10, Events: 10, Before: 2, After: 2, SwitchNodes: true, LiveInterval: 5 * time.Millisecond},
		{Clients: 10, Events: 3, After: 1, Channel: "recover-fresh", SwitchNodes: true},
	} {
		c.Target, c.Outage, c.Wait = target, 100*time.Millisecond, patience
		rep, err := Recover(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Clean() || rep.Recovery.Recovered != 10 || rep.Recovery.Replayed < 10*int64(c.Events) || !slices.Equal(rep.Reconnect.PerNode, []int{5, 5}) {
			t.Fatalf("%+v: recovery %+v, reconnect %+v, delivery %+v; want all 10 back, 5 on each node", c, rep.Recovery, rep.Reconnect, rep.Delivery)
		}
		if u := rep.ServerUsage; u == nil || len(u.Nodes) != 2 {
			t.Fatalf("server usage %+v; want both nodes", u)
		}
	}
}

// TestRecoverTooOld: a history of 5 events cannot recover 10 missed ones: every client reports
// recovered:false, too_old, and the run is not clean.
func TestRecoverTooOld(t *testing.T) {
	target := startHistory(t, 5, nil)
	rep, err := Recover(t.Context(), RecoverConfig{Target: target, Clients: 6, Outage: time.Millisecond, Events: 10, Before: 1, After: 1, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	rc := rep.Recovery
	if rc.Recovered != 0 || rc.Failed != 6 || rc.ByReason["recovered:false, too_old"] != 6 || rc.Replayed != 0 || rc.AllSeconds != 0 {
		t.Fatalf("recovery %+v; want 6 too_old", rc)
	}
	if d := rep.Delivery; d.Missing != 6*10 || d.Delivered != 6*2 || d.Duplicated != 0 || rep.Clean() {
		t.Fatalf("delivery %+v; want the 10 outage events missing on each client, the others in", d)
	}
	checkText(t, rep, "recovered    0 of 6, 6 failed", "6× recovered:false, too_old", "all back     NO")
}

// TestRecoverNoticesALostEvent: a server that answers an outage event's publish but never
// keeps it replays consecutive offsets without it: the offsets no longer match the events, and
// no client counts as recovered.
func TestRecoverNoticesALostEvent(t *testing.T) {
	target := startHistory(t, 1000, swallowSeq(4))
	rep, err := Recover(t.Context(), RecoverConfig{Target: target, Clients: 5, Outage: time.Millisecond, Events: 5, Before: 1, After: 1, Wait: patience})
	if err != nil {
		t.Fatal(err)
	}
	if rc := rep.Recovery; rc.Recovered != 0 || rc.ByReason["positions that do not follow"] != 5 || rc.PositionErrors == 0 {
		t.Fatalf("recovery %+v; want 5 failed on their positions", rc)
	}
	if d := rep.Delivery; d.Missing != 5 || rep.Clean() {
		t.Fatalf("delivery %+v; want event 4 missing on each client", d)
	}
}

// swallowSeq answers the publish of event seq without publishing it.
func swallowSeq(seq int) func(http.Handler) http.Handler {
	return interceptSeq(seq, func(_ http.Handler, w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Write([]byte("{}"))
	})
}

// TestRecoverWithoutHistory: a channel the server keeps no history for fails the run at once,
// saying so.
func TestRecoverWithoutHistory(t *testing.T) {
	target := startHerald(t, nil)
	_, err := Recover(t.Context(), RecoverConfig{Target: target, Clients: 3, Outage: time.Millisecond, Events: 1, Wait: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "keeps no history") {
		t.Fatalf("err = %v; want the run to say the server keeps no history", err)
	}
}

// TestRecoverConfigErrors: flags that cannot make a run are refused before any connection.
func TestRecoverConfigErrors(t *testing.T) {
	target := startHerald(t, nil)
	for _, c := range []RecoverConfig{
		{Clients: 2, Channels: 3},
		{Outage: -time.Second},
		{Channels: 101, Clients: 200, LiveInterval: time.Second},
	} {
		c.Target = target
		if _, err := Recover(t.Context(), c); err == nil || errors.Is(err, ErrNothingMeasured) {
			t.Errorf("%+v: err = %v; want a configuration error", c, err)
		}
	}
}
