package ingesttest

import (
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/ingest"
)

// Wait bounds every wait of the suite. It is generous: the machines that run it are shared,
// and a Kafka consumer group takes seconds to settle.
const Wait = 60 * time.Second

// NewSource returns the harness of one case: a topic (stream, channel) of its own, with its
// own consumer group and dead-letter topic, on a running broker. The factory releases what it
// made on t's cleanup.
type NewSource func(t testing.TB) *Harness

// Harness is what a factory gives the suite to produce records and build sources with.
type Harness struct {
	// Kind is the pipeline's kind: "kafka", "redis_stream" or "redis_pubsub".
	Kind string
	// Topic is the Record.Topic of the records Produce writes (dead letters name it).
	Topic string
	// Partitions is how many independently ordered logs the topic has: Kafka's partitions,
	// 1 for a Redis stream or channel.
	Partitions int
	// Caps says which promises of the contract the source keeps; the cases that need one it
	// lacks are skipped, naming it.
	Caps Capabilities
	// Produce writes one record per value (the record's value: a JSON object, or bytes that
	// are not JSON), in order, to partition part (0 ≤ part < Partitions), and returns once the
	// broker has them all.
	Produce func(t testing.TB, part int, values ...string)
	// New builds a source of the topic into p, not started. Every source New builds joins the
	// harness's one consumer group under one member name (a node started again), and a group
	// new to the topic begins at its start.
	New func(t testing.TB, p *ingest.Pipeline, o Options) ingest.Source
	// DeadLetters waits until n dead letters are written, failing t after Wait, and returns
	// the dead letters read, in order. Nil without the DeadLetters capability.
	DeadLetters func(t testing.TB, n int) []DeadLetter
	// Stop and Start, when set, kill the broker process (as a crash would) and start it again
	// on the same address; Start returns once it answers. They enable the outage cases.
	Stop, Start func(t testing.TB)
}

// Options are a source's settings that the suite varies.
type Options struct {
	// Batch bounds the records a source takes in one fetch (Kafka's PollRecords, Redis'
	// Count); 0: the source's default.
	Batch int
	// DeadLetter sends bad records to the harness's dead-letter topic or stream.
	DeadLetter bool
}

// DeadLetter is one dead letter as the harness read it back.
type DeadLetter struct {
	Reason   string // the ingest.Reason's name
	Topic    string // the bad record's Topic
	Position string // the bad record's Position; empty for pub/sub
	Value    string // the bad record's value
}

// Capabilities are the promises of the contract a source keeps beyond the ones every source
// keeps (order per partition, bad records skipped and counted, backpressure while running,
// Close, states, reconnection).
type Capabilities uint8

const (
	// AtLeastOnce: the source commits (acknowledges) only what the publisher took, and a
	// source of the same group started later resumes there. Redis pub/sub is at most once.
	AtLeastOnce Capabilities = 1 << iota
	// Replay: records written before the source starts are consumed. Pub/sub loses them.
	Replay
	// Lag: Stats.Lag reports each partition's records not consumed yet.
	Lag
	// DeadLetters: bad records can be written to a dead-letter topic or stream.
	DeadLetters
)

var capNames = []string{"AtLeastOnce", "Replay", "Lag", "DeadLetters"}

// String names the capabilities, joined with "|".
func (c Capabilities) String() string {
	var names []string
	for i, n := range capNames {
		if c&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, "|")
}

// Has reports whether c includes every capability of want.
func (c Capabilities) Has(want Capabilities) bool { return c&want == want }

// need skips t unless h's source has the capabilities of want.
func (h *Harness) need(t testing.TB, want Capabilities, why string) {
	t.Helper()
	if !h.Caps.Has(want) {
		t.Skipf("the %s source lacks capability %v: %s", h.Kind, want&^h.Caps, why)
	}
}
