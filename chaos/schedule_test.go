package chaos

import (
	"reflect"
	"testing"
	"time"
)

var clusterShape = scheduleShape{faults: Faults, nodes: 3, busServers: 3, subscribers: 6}

func TestPlanIsTheSeeds(t *testing.T) {
	o, err := Options{Duration: 10 * time.Minute, Herald: "herald"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a, b := plan(42, o, clusterShape), plan(42, o, clusterShape)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one seed gave two schedules")
	}
	if reflect.DeepEqual(a, plan(43, o, clusterShape)) {
		t.Fatal("two seeds gave one schedule")
	}
	// 10 minutes at one fault every 5 to 15 s: about 60.
	if len(a) < 40 || len(a) > 120 {
		t.Fatalf("%d faults in 10 minutes at one every %v", len(a), o.FaultEvery)
	}
}

func TestPlanKeepsTargetsApart(t *testing.T) {
	o, err := Options{Duration: time.Hour, FaultEvery: Span{time.Second, 3 * time.Second}, Herald: "herald"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	steps := plan(7, o, clusterShape)
	kinds := map[Fault]int{}
	free := map[string]time.Duration{}
	var last time.Duration
	for _, s := range steps {
		kinds[s.Fault]++
		if s.At < last || s.At >= o.Duration {
			t.Fatalf("a step at %v after one at %v, in a run of %v", s.At, last, o.Duration)
		}
		last = s.At
		key := ""
		var span Span
		switch s.Fault {
		case KillNode, PauseNode, PartitionBus, PartitionClients:
			key = "node-" + string(rune('0'+s.Target))
			if s.Target < 1 || s.Target > 3 {
				t.Fatalf("%s of node %d", s.Fault, s.Target)
			}
		case RestartBus, KillBus:
			key = "bus"
			if s.Target < 1 || s.Target > 3 {
				t.Fatalf("%s of server %d", s.Fault, s.Target)
			}
		case PowerCut:
			key = "bus"
			if s.Target != 0 {
				t.Fatalf("%s of server %d, want every server (0)", s.Fault, s.Target)
			}
		case CutClients:
			if len(s.Subscribers) == 0 {
				t.Fatal("cut-clients of nobody")
			}
			for _, i := range s.Subscribers {
				if i < 1 || i > 6 {
					t.Fatalf("cut-clients of subscriber %d", i)
				}
			}
			continue
		}
		switch s.Fault {
		case KillNode, RestartBus, KillBus, PowerCut:
			span = o.Down
		case PauseNode:
			span = o.Pause
		default:
			span = o.Partition
		}
		if s.For < span.Min || s.For > span.Max {
			t.Fatalf("%s for %v, outside %v", s.Fault, s.For, span)
		}
		if s.At < free[key] {
			t.Fatalf("%s of %s at %v while its last fault lasts until %v", s.Fault, key, s.At, free[key])
		}
		free[key] = s.At + s.For
	}
	for _, f := range Faults {
		if kinds[f] < len(steps)/len(Faults)/3 {
			t.Errorf("%d of %d faults are %s", kinds[f], len(steps), f)
		}
	}
}

// A setup without a bus or namespaces plans only what it can inject.
func TestPlanOnlyTheSetupsFaults(t *testing.T) {
	o, err := Options{Duration: time.Hour, Herald: "herald"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	single := scheduleShape{faults: []Fault{KillNode, PauseNode, CutClients}, nodes: 1, subscribers: 6}
	for _, s := range plan(1, o, single) {
		if s.Fault != KillNode && s.Fault != PauseNode && s.Fault != CutClients {
			t.Fatalf("a single node on loopback was given %s", s.Fault)
		}
	}
}

func TestParseSpan(t *testing.T) {
	for in, want := range map[string]Span{"5s,15s": {5 * time.Second, 15 * time.Second}, "2s": {2 * time.Second, 2 * time.Second}} {
		if got, err := ParseSpan(in); err != nil || got != want {
			t.Errorf("ParseSpan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "5s,", "15s,5s", "0s,1s", "x"} {
		if _, err := ParseSpan(in); err == nil {
			t.Errorf("ParseSpan(%q) accepted it", in)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{
		{Setup: "kafka", Herald: "h"},
		{Setup: Redis, Nodes: 1, Herald: "h"},
		{Publishers: 7, Channels: 6, Herald: "h"},
		{RedisAOF: "sometimes", Herald: "h"},
		{},
	} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
