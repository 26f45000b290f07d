package ingest

import (
	"sort"
	"sync"
	"sync/atomic"
)

// State is a source's state in /health and the source_up metric.
type State string

// The states of a source.
const (
	StateStarting State = "starting" // connecting for the first time
	StateUp       State = "up"       // consuming
	StatePaused   State = "paused"   // the node refuses events: retrying, fetching nothing
	StateDown     State = "down"     // the broker is unreachable: reconnecting with backoff
	StateStopped  State = "stopped"
)

// Stats is a snapshot of one source's counters.
type Stats struct {
	Name  string
	Kind  string
	State State
	Error string // the last connection error while down

	Consumed         uint64 // records fetched and handed to the pipeline
	Published        uint64 // events handed to the node
	Bad              [numReasons]uint64
	DeadLettered     uint64
	DeadLetterErrors uint64
	PublishRetries   uint64 // publishes the node refused (backpressure), each retried
	CommitErrors     uint64 // commits (Kafka) or acknowledgements (Redis) that failed
	Reclaimed        uint64 // Redis: pending entries claimed from idle consumers
	Resent           uint64 // events handed off again after the bus connection was replaced (Reconnector)
	Lag              []Lag
}

// Lag is how far the source is behind one partition's (or stream's) end.
type Lag struct {
	Topic     string
	Partition int32
	Records   int64
}

// Up reports whether the source is consuming (or paused by the server, which is no outage).
func (s Stats) Up() bool { return s.State == StateUp || s.State == StatePaused }

type lagKey struct {
	topic     string
	partition int32
}

// counters are a source's counts, written by its goroutine and read by Stats.
type counters struct {
	name, kind                                        string
	consumed, published, deadLettered, deadLetterErrs atomic.Uint64
	retries, commitErrors, reclaimed, resent          atomic.Uint64
	bad                                               [numReasons]atomic.Uint64
	paused                                            atomic.Bool

	mu    sync.Mutex
	state State
	err   string
	lag   map[lagKey]int64
}

func (c *counters) init(name, kind string) {
	c.name, c.kind, c.state, c.lag = name, kind, StateStarting, map[lagKey]int64{}
}

func (c *counters) setPaused(v bool) {
	if c.paused.Load() != v {
		c.paused.Store(v)
	}
}

func (c *counters) badTotal() uint64 {
	var n uint64
	for i := range c.bad {
		n += c.bad[i].Load()
	}
	return n
}

// SetState records the source's connection state and, when down, why.
func (p *Pipeline) SetState(s State, err error) {
	c := &p.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state, c.err = s, ""
	if err != nil {
		c.err = err.Error()
	}
}

// SetLag records how many records of a partition are not consumed yet.
func (p *Pipeline) SetLag(topic string, partition int32, lag int64) {
	c := &p.stats
	c.mu.Lock()
	c.lag[lagKey{topic, partition}] = max(lag, 0)
	c.mu.Unlock()
}

// DropLag forgets a partition this source no longer consumes.
func (p *Pipeline) DropLag(topic string, partition int32) {
	c := &p.stats
	c.mu.Lock()
	delete(c.lag, lagKey{topic, partition})
	c.mu.Unlock()
}

// CommitFailed counts a failed commit or acknowledgement.
func (p *Pipeline) CommitFailed() { p.stats.commitErrors.Add(1) }

// Reclaimed counts entries claimed from other consumers.
func (p *Pipeline) Reclaimed(n int) { p.stats.reclaimed.Add(uint64(n)) }

// Stats returns a snapshot of the source's counters.
func (p *Pipeline) Stats() Stats {
	c := &p.stats
	s := Stats{Name: c.name, Kind: c.kind, Consumed: c.consumed.Load(), Published: c.published.Load(),
		DeadLettered: c.deadLettered.Load(), DeadLetterErrors: c.deadLetterErrs.Load(),
		PublishRetries: c.retries.Load(), CommitErrors: c.commitErrors.Load(), Reclaimed: c.reclaimed.Load(),
		Resent: c.resent.Load()}
	for i := range c.bad {
		s.Bad[i] = c.bad[i].Load()
	}
	c.mu.Lock()
	s.State, s.Error = c.state, c.err
	for k, v := range c.lag {
		s.Lag = append(s.Lag, Lag{Topic: k.topic, Partition: k.partition, Records: v})
	}
	c.mu.Unlock()
	if s.State == StateUp && c.paused.Load() {
		s.State = StatePaused
	}
	sort.Slice(s.Lag, func(i, j int) bool {
		if s.Lag[i].Topic != s.Lag[j].Topic {
			return s.Lag[i].Topic < s.Lag[j].Topic
		}
		return s.Lag[i].Partition < s.Lag[j].Partition
	})
	return s
}
