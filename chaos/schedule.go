package chaos

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// Fault is a kind of fault the nemesis injects.
type Fault string

// The faults.
const (
	KillNode         Fault = "kill-node"         // SIGKILL a herald node, start it again after Down
	PauseNode        Fault = "pause-node"        // SIGSTOP a herald node, SIGCONT after Pause
	RestartBus       Fault = "restart-bus"       // SIGTERM a bus server, start it again after Down
	KillBus          Fault = "kill-bus"          // SIGKILL a bus server, start it again after Down
	CutClients       Fault = "cut-clients"       // reset the connections of some subscribers
	PartitionBus     Fault = "partition-bus"     // a node's link to the bus down for Partition
	PartitionClients Fault = "partition-clients" // a node's link to its clients down for Partition
	// PowerCut kills every bus server at once, takes back what they wrote and did not fsync
	// (their data directories are lazy file systems, package lazyfs), and starts them again
	// after Down: a power cut of the bus's machine. Only with Options.PowerCut.
	PowerCut Fault = "power-cut"
)

// Faults lists every fault, in the order reports give them.
var Faults = []Fault{KillNode, PauseNode, RestartBus, KillBus, CutClients, PartitionBus, PartitionClients, PowerCut}

// Step is one fault of the schedule: what, where, when and for how long. The schedule is
// drawn from the seed alone, so a seed gives the same schedule on every machine; when the
// run reaches a step whose target is still busy (a restart slower than planned), the step
// waits for it (Started says when it began).
type Step struct {
	At          time.Duration `json:"at"` // planned, from the start of the faults
	Fault       Fault         `json:"fault"`
	Target      int           `json:"target,omitempty"`      // the node or bus server, from 1
	For         time.Duration `json:"for,omitempty"`         // down, stopped or cut off this long
	Subscribers []int         `json:"subscribers,omitempty"` // cut-clients: whose connections (from 1)

	Started time.Duration `json:"started,omitempty"` // from the run's start; 0: not run
	Ended   time.Duration `json:"ended,omitempty"`
	Err     string        `json:"error,omitempty"`
	// Lost: a power cut's, what it took back of each bus server's files.
	Lost string `json:"lost,omitempty"`
}

// margins are what the schedule adds to a fault's For before its target takes another: the
// time a restart takes, about.
const (
	restartMargin = 5 * time.Second
	resumeMargin  = time.Second
)

// scheduleShape is what a schedule is drawn for.
type scheduleShape struct {
	faults      []Fault // the kinds the setup allows
	nodes       int
	busServers  int
	subscribers int
}

// plan draws the schedule of a run of duration: a fault every o.FaultEvery, of a kind drawn
// among those whose targets are free (a node takes one fault at a time, the bus one server
// down at a time) and that were drawn least so far, the target drawn among the free ones.
func plan(seed uint64, o Options, shape scheduleShape) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis"
	draw := func(s Span) time.Duration { return s.Min + time.Duration(rng.Int64N(int64(s.Max-s.Min)+1)) }
	busyUntil := map[string]time.Duration{}
	free := func(key string, at time.Duration) bool { return busyUntil[key] <= at }
	used := map[Fault]int{} // faults of each kind so far
	var steps []Step
	for at := draw(o.FaultEvery); at < o.Duration; at += draw(o.FaultEvery) {
		// The kinds whose targets are free now, and among them those used least so far: the
		// kinds come out about equally often, whatever their durations.
		var kinds []Fault
		targets := map[Fault][]int{}
		for _, f := range shape.faults {
			switch f {
			case RestartBus, KillBus:
				if free("bus", at) {
					for t := 1; t <= shape.busServers; t++ {
						targets[f] = append(targets[f], t)
					}
				}
			case PowerCut:
				if free("bus", at) {
					targets[f] = []int{0} // every server
				}
			case CutClients:
				targets[f] = []int{0}
			default:
				for t := 1; t <= shape.nodes; t++ {
					if free(nodeKey(t), at) {
						targets[f] = append(targets[f], t)
					}
				}
			}
			if len(targets[f]) == 0 {
				continue
			}
			if len(kinds) > 0 && used[f] < used[kinds[0]] {
				kinds = kinds[:0]
			}
			if len(kinds) == 0 || used[f] == used[kinds[0]] {
				kinds = append(kinds, f)
			}
		}
		f := kinds[rng.IntN(len(kinds))] // cut-clients is always possible
		used[f]++
		s := Step{At: at, Fault: f, Target: targets[f][rng.IntN(len(targets[f]))]}
		key := nodeKey(s.Target)
		switch f {
		case RestartBus, KillBus, PowerCut:
			key = "bus"
		}
		switch f {
		case PowerCut: // the whole bus starts again, and a NATS cluster forms again
			s.For = draw(o.Down)
			busyUntil[key] = at + s.For + 3*restartMargin
		case KillNode, RestartBus, KillBus:
			s.For = draw(o.Down)
			busyUntil[key] = at + s.For + restartMargin
		case PauseNode:
			s.For = draw(o.Pause)
			busyUntil[key] = at + s.For + resumeMargin
		case PartitionBus, PartitionClients:
			s.For = draw(o.Partition)
			busyUntil[key] = at + s.For + resumeMargin
		case CutClients:
			for i := range shape.subscribers {
				if rng.IntN(2) == 0 {
					s.Subscribers = append(s.Subscribers, i+1)
				}
			}
			if len(s.Subscribers) == 0 {
				s.Subscribers = []int{1 + rng.IntN(shape.subscribers)}
			}
		}
		steps = append(steps, s)
	}
	return steps
}

func nodeKey(t int) string { return "node-" + strconv.Itoa(t) }
