package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePIDs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"", nil}, {"0", nil}, {" ", nil}, {"42", []int{42}}, {"42,43", []int{42, 43}}, {" 42 , 43 ,44", []int{42, 43, 44}},
	} {
		got, err := ParsePIDs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParsePIDs(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"1,,2", `element 2 of 3 is empty`},
		{"1,", `element 2 of 2 is empty`},
		{",1", `element 1 of 2 is empty`},
		{"x", `"x": not a process id`},
		{"-3", `not a process id`},
		{"1,0", `element 2 ("0") is not a process id`},
		{"1,abc", `element 2 ("abc") is not a process id`},
	} {
		_, err := ParsePIDs(c.in)
		if err == nil || !strings.HasPrefix(err.Error(), "--server-pid") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePIDs(%q) error %v; want one naming --server-pid and saying %q", c.in, err, c.want)
		}
	}
}

// TestTargetCheckLists: every malformed list gives an error naming its flag (and the node).
func TestTargetCheckLists(t *testing.T) {
	for _, c := range []struct {
		t    Target
		want string
	}{
		{Target{WS: "ws://127.0.0.1:1,,ws://127.0.0.1:2"}, `--ws "ws://127.0.0.1:1,,ws://127.0.0.1:2": element 2 of 3 is empty`},
		{Target{WS: "ws://127.0.0.1:1,"}, `--ws "ws://127.0.0.1:1,": element 2 of 2 is empty`},
		{Target{WS: "ws://127.0.0.1:1,http://127.0.0.1:2"}, `--ws node 2 "http://127.0.0.1:2": only ws:// and wss:// URLs are supported`},
		{Target{WS: "ws://127.0.0.1:1,ws://%zz"}, `--ws node 2 "ws://%zz"`},
		{Target{WS: "ws://127.0.0.1:1,ws:///x"}, `--ws node 2 "ws:///x": no host`},
		{Target{WS: "http://127.0.0.1:1"}, `--ws "http://127.0.0.1:1": only ws:// and wss:// URLs`},
		{Target{WS: "ws://127.0.0.1:1,ws://127.0.0.1:2", ServerPIDs: []int{1, 1, 1}}, `--server-pid: 3 pids for 2 --ws nodes`},
		{Target{WS: "ws://127.0.0.1:1", ServerPIDs: []int{1, 1}}, `--server-pid: 2 pids for 1 --ws nodes`},
		{Target{ServerPIDs: []int{-1}}, `--server-pid -1: not a process id`},
		{Target{Metrics: "http://127.0.0.1:9601/metrics,,"}, `--metrics "http://127.0.0.1:9601/metrics,,": element 2 of 3 is empty`},
		{Target{Metrics: "http://127.0.0.1:9601/metrics,ftp://127.0.0.1:9602"}, `--metrics "ftp://127.0.0.1:9602": want an http:// or https:// URL`},
		{Target{Metrics: "127.0.0.1:9602"}, `--metrics "127.0.0.1:9602"`},
	} {
		err := c.t.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v; want %q", c.t, err, c.want)
		}
	}
	ok := Target{WS: "ws://127.0.0.1:1, ws://127.0.0.1:2", ServerPIDs: []int{1, 1}, Metrics: "http://127.0.0.1:3/metrics,http://127.0.0.1:4/metrics"}
	if err := ok.Check(); err != nil {
		t.Errorf("Check(%+v) = %v; want nil", ok, err)
	}
	if eps, _ := ok.wsEndpoints(); len(eps) != 2 || eps[1].addr != "127.0.0.1:2" {
		t.Errorf("endpoints %+v; want 2, the second on 127.0.0.1:2", eps)
	}
	if _, _, err := (Target{REST: "http://127.0.0.1:1,http://127.0.0.1:2"}).eventsURL(); err == nil || !strings.Contains(err.Error(), "--rest") {
		t.Errorf("a list for --rest: %v; want an error naming --rest", err)
	}
}

func TestHTTPBase(t *testing.T) {
	for in, want := range map[string]string{
		"ws://127.0.0.1:6001":       "http://127.0.0.1:6001",
		"ws://127.0.0.1:6001/":      "http://127.0.0.1:6001",
		"wss://example.com/pusher/": "https://example.com/pusher",
		"ws://[::1]:7":              "http://[::1]:7",
	} {
		if got, err := httpBase(in); err != nil || got != want {
			t.Errorf("httpBase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"http://127.0.0.1:1", "ws:///x", "%zz"} {
		if got, err := httpBase(in); err == nil {
			t.Errorf("httpBase(%q) = %q; want an error", in, got)
		}
	}
}

// TestNodeSpreadOverProcs: however the connections are split over child processes, the
// children's offsets make connection i (counted over the run) go to node i mod N, each index
// exactly once, so every node holds its exact share.
func TestNodeSpreadOverProcs(t *testing.T) {
	for nodes := 1; nodes <= 4; nodes++ {
		for procs := 1; procs <= 5; procs++ {
			for conns := 0; conns <= 23; conns++ {
				seen := make([]int, conns)
				perNode := make([]int, nodes)
				for _, share := range shares(subSpec{Conns: conns}, procs) {
					for j := range share.Conns {
						i := share.Offset + j // as connect numbers a child's client j
						seen[i]++
						perNode[nodeOf(i, nodes)]++
					}
				}
				for i, n := range seen {
					if n != 1 {
						t.Fatalf("%d conns over %d procs: connection %d opened %d times", conns, procs, i, n)
					}
				}
				for k, n := range perNode {
					if want := (conns + nodes - 1 - k) / nodes; n != want {
						t.Fatalf("%d conns over %d procs and %d nodes: node %d holds %d; want %d (per node %v)", conns, procs, nodes, k, n, want, perNode)
					}
				}
			}
		}
	}
	// The case a child's local numbering would get wrong: 6 over 2 children and 2 nodes is
	// 3 + 3 only if the second child starts at 3.
	sh := shares(subSpec{Conns: 6, Offset: 0}, 2)
	if sh[0].Offset != 0 || sh[0].Conns != 3 || sh[1].Offset != 3 || sh[1].Conns != 3 {
		t.Fatalf("shares %+v; want 0+3 and 3+3", sh)
	}
}

func TestSetupMergePerNode(t *testing.T) {
	s := Setup{Established: 3, PerNode: []int{2, 1}}
	s.merge(Setup{Established: 3, PerNode: []int{1, 2}})
	s.merge(Setup{Established: 0})
	if s.Established != 6 || !slices.Equal(s.PerNode, []int{3, 3}) {
		t.Fatalf("merged %+v; want 6 established, 3 and 3 per node", s)
	}
	var empty Setup
	empty.merge(Setup{PerNode: []int{1, 0, 4}})
	if !slices.Equal(empty.PerNode, []int{1, 0, 4}) {
		t.Fatalf("merged into empty: %v", empty.PerNode)
	}
}

func TestServerInfoOn(t *testing.T) {
	one := Target{WS: "ws://127.0.0.1:6001", REST: "http://127.0.0.1:6001", ServerPIDs: []int{7}}
	if got, want := one.info(true).on(), "on ws://127.0.0.1:6001 and http://127.0.0.1:6001 (server pid 7)"; got != want {
		t.Errorf("one node: %q; want %q", got, want)
	}
	if got, want := one.info(false).on(), "on ws://127.0.0.1:6001 (server pid 7)"; got != want {
		t.Errorf("one node, no REST: %q; want %q", got, want)
	}
	two := Target{WS: "ws://127.0.0.1:6001,ws://127.0.0.1:6002", REST: "http://127.0.0.1:6001", ServerPIDs: []int{7, 8}}
	info := two.info(true)
	if got, want := info.on(), "on 2 nodes ws://127.0.0.1:6001, ws://127.0.0.1:6002, publishing to http://127.0.0.1:6001 (server pids 7, 8)"; got != want {
		t.Errorf("two nodes: %q; want %q", got, want)
	}
	if !slices.Equal(info.Nodes, []string{"ws://127.0.0.1:6001", "ws://127.0.0.1:6002"}) || info.PID != 0 || !slices.Equal(info.PIDs, []int{7, 8}) {
		t.Errorf("info %+v; want both nodes and both pids", info)
	}
	shared := Target{WS: "ws://127.0.0.1:6001,ws://127.0.0.1:6002", ServerPIDs: []int{7}}
	if info := shared.info(false); info.PID != 7 || info.PIDs != nil || info.on() != "on 2 nodes ws://127.0.0.1:6001, ws://127.0.0.1:6002 (server pid 7)" {
		t.Errorf("one pid for two nodes: %+v, %q", info, info.on())
	}
}

// TestServerRSSFill: with one pid per node, the totals are sums and each node's growth is
// divided by its own connections.
func TestServerRSSFill(t *testing.T) {
	s := serverProcs{pids: []int{7, 8}, nodes: []string{"ws://a:1", "ws://b:2"}}
	var r ServerRSS
	r.fill(s, []int64{1000, 2000}, []int64{3000, 2600}, []int{4, 3}, 7)
	if r.BaselineBytes != 3000 || r.AfterBytes != 5600 || r.PerConnBytes != 2600.0/7 || len(r.Nodes) != 2 {
		t.Fatalf("totals %+v", r)
	}
	if n := r.Nodes[0]; n.WS != "ws://a:1" || n.PID != 7 || n.Connections != 4 || n.PerConnBytes != 500 {
		t.Errorf("node 1 %+v; want 2000 B over 4 connections", n)
	}
	if n := r.Nodes[1]; n.WS != "ws://b:2" || n.PID != 8 || n.Connections != 3 || n.PerConnBytes != 200 {
		t.Errorf("node 2 %+v; want 600 B over 3 connections", n)
	}
	var whole ServerRSS
	whole.fill(serverProcs{pids: []int{7}}, []int64{1000}, []int64{2000}, nil, 10)
	if whole.Nodes != nil || whole.PerConnBytes != 100 {
		t.Errorf("one pid: %+v; want 100 B per connection, no nodes", whole)
	}
}
