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
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/ssetest"
	"github.com/herald-rt/herald/internal/wstest"
)

const consoleToken = "console-test-token-0123456789"

// consoleStream is an open /console/stream, read by its own goroutine.
type consoleStream struct {
	*ssetest.Stream
	logs []string // every log event await has read, whatever it waited for
}

func openConsoleStream(t *testing.T, n *node, query string) *consoleStream {
	t.Helper()
	return &consoleStream{Stream: ssetest.Open(t, "http://"+n.metrics+"/console/stream"+query, consoleToken)}
}

// await reads events until one named name satisfies ok (given its data), failing after
// clusterWait. Log events read while waiting for another are kept and searched first.
func (s *consoleStream) await(t *testing.T, name, what string, ok func(data string) bool) string {
	t.Helper()
	if name == "log" {
		for _, l := range s.logs {
			if ok(l) {
				return l
			}
		}
	}
	deadline := time.After(clusterWait)
	last := ""
	for {
		select {
		case ev, open := <-s.Events:
			if !open {
				t.Fatalf("stream ended waiting for %s (last %s: %s)", what, name, last)
			}
			if ev.Name == "log" {
				s.logs = append(s.logs, ev.Data)
			}
			if ev.Name == name {
				last = ev.Data
				if ok(ev.Data) {
					return ev.Data
				}
			}
		case <-deadline:
			t.Fatalf("waited %v for %s; last %s: %s", clusterWait, what, name, last)
		}
	}
}

// consoleOverview is the part of the overview event these tests read.
type consoleOverview struct {
	Nodes []struct {
		Node string
		Apps []struct {
			ID          string
			Connections int64
			Channels    int64
		}
	}
	Channels int
	Top      []struct {
		Name          string
		Subscriptions int
	}
}

func (o consoleOverview) connections(node string) int64 {
	for _, n := range o.Nodes {
		if n.Node == node {
			for _, a := range n.Apps {
				if a.ID == restApp.ID {
					return a.Connections
				}
			}
		}
	}
	return -1
}

func overviewOf(t *testing.T, data string) consoleOverview {
	t.Helper()
	var o consoleOverview
	if err := json.Unmarshal([]byte(data), &o); err != nil {
		t.Fatalf("overview %s: %v", data, err)
	}
	return o
}

// consoleCall sends a request to the node's console with the bearer token (unless bearer is
// false) and returns the status and body.
func consoleCall(t *testing.T, n *node, method, path, body string, bearer bool) (int, string) {
	t.Helper()
	status, b, err := tryConsoleCall(n, method, path, body, bearer)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return status, b
}

func tryConsoleCall(n *node, method, path, body string, bearer bool) (int, string, error) {
	req, _ := http.NewRequest(method, "http://"+n.metrics+path, strings.NewReader(body))
	if bearer {
		req.Header.Set("Authorization", "Bearer "+consoleToken)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestConsoleServe runs `herald serve` with and without console.token: without, /console is
// 404 on the metrics listener; with, it is 401 without the token, its stream shows a
// client's connection, its debug log the client's connection and subscription (the node's
// activity through the console's observer), its event creator publishes as REST does, and
// SIGTERM with a page open still stops the node cleanly.
func TestConsoleServe(t *testing.T) {
	off := startServe(t, "no-console")
	poll.NoError(t, clusterWait, "the metrics listener", func() error {
		status, _, err := tryConsoleCall(off, "GET", "/metrics", "", false)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("/metrics: %d", status)
		}
		return err
	})
	if status, body := consoleCall(t, off, "GET", "/console", "", true); status != http.StatusNotFound {
		t.Errorf("no console.token: /console answered %d %s; want 404", status, body)
	}
	if err := off.stop(); err != nil {
		t.Fatal(err)
	}

	n := startServe(t, "console", "--console-token", consoleToken)
	poll.NoError(t, clusterWait, "the console", func() error {
		status, body, err := tryConsoleCall(n, "GET", "/console", "", true)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("/console: %d %s", status, body)
		}
		return err
	})
	if status, _ := consoleCall(t, n, "GET", "/console", "", false); status != http.StatusUnauthorized {
		t.Errorf("/console without the token: %d; want 401", status)
	}
	if status, _ := consoleCall(t, n, "POST", "/console/apps/app-id/events", `{"name":"x","channel":"c","data":"d"}`, false); status != http.StatusUnauthorized {
		t.Errorf("event creator without the token: %d; want 401", status)
	}

	s := openConsoleStream(t, n, "?app="+restApp.ID)
	sub := subscribe(t, n, "console-room")
	s.await(t, "overview", "the overview counting the client and its channel", func(data string) bool {
		o := overviewOf(t, data)
		return o.connections("") == 1 && o.Channels == 1 && len(o.Top) == 1 && o.Top[0].Name == "console-room" && o.Top[0].Subscriptions == 1
	})
	s.await(t, "log", "the log showing the client's connection", func(data string) bool {
		return strings.Contains(data, `"kind":"connection_opened"`)
	})
	s.await(t, "log", "the log showing the subscription", func(data string) bool {
		return strings.Contains(data, `"kind":"subscribed","time_ms"`) && strings.Contains(data, `"channel":"console-room"`)
	})

	status, body := consoleCall(t, n, "POST", "/console/apps/app-id/events", `{"name":"hello","channel":"console-room","data":"{\"from\":\"console\"}"}`, true)
	if status != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Fatalf("event creator: %d %s", status, body)
	}
	select {
	case m := <-sub.msgs:
		if m.Event != "hello" || m.Channel != "console-room" || m.DataString() != `{"from":"console"}` {
			t.Errorf("the subscriber got %+v; want hello on console-room", m)
		}
	case <-time.After(clusterWait):
		t.Fatal("the console's event did not reach the subscriber")
	}
	s.await(t, "log", "the log showing the API event", func(data string) bool {
		return strings.Contains(data, `"kind":"api_event"`) && strings.Contains(data, `"event":"hello"`)
	})
	status, body = consoleCall(t, n, "POST", "/console/apps/app-id/events", `{"name":"hello","channel":"no room","data":"x"}`, true)
	if status != http.StatusBadRequest || !strings.Contains(body, "invalid character ' '") {
		t.Errorf("bad channel: %d %s; want the REST API's 400", status, body)
	}
	status, body = consoleCall(t, n, "POST", "/console/apps/app-id/events", `{"name":"pusher:error","channel":"console-room","data":"{}"}`, true)
	if status != http.StatusBadRequest || !strings.Contains(body, `\"pusher:error\" is reserved`) {
		t.Errorf("a reserved event name: %d %s; want 400 saying it is reserved", status, body)
	}
	status, _ = consoleCall(t, n, "POST", "/console/apps/nope/events", `{"name":"hello","channel":"room","data":"x"}`, true)
	if status != http.StatusNotFound {
		t.Errorf("unknown app: %d; want 404", status)
	}

	// SIGTERM with the page still open: the node stops, and the stream ends.
	start := time.Now()
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stop took %v with a console page open", d)
	}
	select {
	case <-s.Done:
	case <-time.After(clusterWait):
		t.Error("the stream outlived the node")
	}
}

// TestConsoleCluster: two nodes on NATS, each with a console; the overview of either shows
// both nodes, the other's client counted on the other, and the channel cluster-wide.
func TestConsoleCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server and herald nodes")
	}
	bus := servicetest.NATS(t)
	a := startNode(t, "node-a", bus.URL(), "--console-token", consoleToken)
	b := startNode(t, "node-b", bus.URL(), "--console-token", consoleToken)
	for _, n := range []*node{a, b} {
		n.waitHealth(t, "connected", func(h nodeHealth) error { return h.want("ok", "nats", true) })
	}
	subscribe(t, b, "shared-room")
	c, err := wstest.Dial(a.api, "/app/"+restApp.Key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := openConsoleStream(t, a, "?app="+restApp.ID)
	data := s.await(t, "overview", "node-a's overview listing both nodes' clients and b's channel", func(data string) bool {
		o := overviewOf(t, data)
		return len(o.Nodes) == 2 && o.connections("node-a") == 1 && o.connections("node-b") == 1 &&
			o.Channels == 1 && len(o.Top) == 1 && o.Top[0].Name == "shared-room" && o.Top[0].Subscriptions == 1
	})
	if o := overviewOf(t, data); o.Nodes[0].Node != "node-a" {
		t.Errorf("nodes %+v: want this node first", o.Nodes)
	}
	for _, n := range []*node{a, b} {
		if err := n.stop(); err != nil {
			t.Errorf("%s: %v", n.name, err)
		}
	}
}

func TestConsoleTopChannels(t *testing.T) {
	var stats []herald.ChannelStat
	for i, subs := range []int{3, 9, 1, 9, 0, 7, 2, 8, 5, 9} {
		stats = append(stats, herald.ChannelStat{Name: fmt.Sprintf("c%d", i), SubscriptionCount: subs})
	}
	got := fmt.Sprint(topOf(stats, 4))
	if want := "[{c1 9} {c3 9} {c9 9} {c7 8}]"; got != want {
		t.Errorf("top 4: %s; want %s", got, want)
	}
	if got := fmt.Sprint(topOf(stats[:2], 4)); got != "[{c1 9} {c0 3}]" {
		t.Errorf("top 4 of 2: %s", got)
	}
	if got := topOf(stats, 0); len(got) != 0 {
		t.Errorf("top 0: %v", got)
	}
}
