package chaos

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Setup is what the herald nodes run on.
type Setup string

// The setups.
const (
	Single Setup = "single" // one herald node, no bus
	Redis  Setup = "redis"  // herald nodes over one redis-server
	NATS   Setup = "nats"   // herald nodes over a cluster of three nats-servers with JetStream
)

// Span is a range of durations; a value drawn from it is uniform from Min to Max.
type Span struct{ Min, Max time.Duration }

// ParseSpan reads "min,max" ("5s,15s"), or one duration for both.
func ParseSpan(s string) (Span, error) {
	lo, hi, found := strings.Cut(s, ",")
	if !found {
		hi = lo
	}
	a, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return Span{}, fmt.Errorf("%q: %w", s, err)
	}
	b, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil {
		return Span{}, fmt.Errorf("%q: %w", s, err)
	}
	if a <= 0 || b < a {
		return Span{}, fmt.Errorf("%q: want 0 < min <= max", s)
	}
	return Span{a, b}, nil
}

func (s Span) String() string { return s.Min.String() + "," + s.Max.String() }

// Options is one run. The zero value of a field is its default (DefaultOptions).
type Options struct {
	Setup    Setup
	Duration time.Duration // how long the publishers publish and the nemesis strikes
	Seed     uint64        // the nemesis's schedule and every random choice of the run

	FaultEvery Span // the time between two faults (5s,15s)
	Pause      Span // how long a node stays stopped (SIGSTOP) (1s,30s)
	Partition  Span // how long a link stays down (1s,30s)
	Down       Span // how long a killed node or bus server stays down before its restart (100ms,3s)

	Nodes       int     // herald nodes of a cluster (3); a single setup has one
	Channels    int     // channels the REST publishers publish to (6), chaos-1 ...
	Publishers  int     // REST publishers (3); each owns every Publishers-th channel
	Subscribers int     // subscribers (6), each subscribed to every channel
	Rate        float64 // events a second each publisher publishes at most (10)

	// Kafka adds a producer of numbered records to a topic that every node ingests into
	// channels of their own (chaos-k1 ...), KafkaChannels of them (3).
	Kafka         bool
	KafkaChannels int

	// PublishTimeout bounds one REST attempt (5s); Catchup bounds the wait, once the faults
	// have stopped, for the publishers' last events and for the subscribers to receive every
	// event (2m).
	PublishTimeout time.Duration
	Catchup        time.Duration

	// RedisAOF is the redis-server's persistence: "always" (appendfsync always, the default:
	// nothing acknowledged is lost to a kill), "everysec" or "off" (no persistence: a restart
	// loses every history).
	RedisAOF string

	// PowerCut adds the power-cut fault (redis and nats setups): each bus server's data
	// directory is a lazy file system (package lazyfs, needs FUSE and root), and a power
	// cut kills every bus server at once, takes back what they had not fsynced, and starts
	// them again. What it loses depends on the servers' settings: RedisAOF, NATSSync.
	PowerCut bool
	// NATSSync is JetStream's sync_interval on every nats-server: "" leaves the server's
	// default (2 minutes), "always" syncs each write, a duration syncs that often. Needs a
	// nats-server that has the setting (2.10 or later).
	NATSSync string
	// Faults, when not empty, are the only kinds of fault the nemesis injects.
	Faults []Fault

	Herald      string // the herald binary (required)
	RedisServer string // redis-server (default: found on PATH, /usr/sbin, /usr/bin)
	NATSServer  string // nats-server (likewise)

	// Loopback runs every process on 127.0.0.1 without network namespaces, and so without
	// partitions. Without it the harness uses namespaces when the kernel lets it, and falls
	// back to loopback with a warning when it does not.
	Loopback bool

	// Dir is where the run keeps its configuration, logs and stores; empty: a new temporary
	// directory, removed at the end unless the run failed.
	Dir string

	Log *slog.Logger // progress; nil: discarded
}

// DefaultOptions are the values a zero field takes.
var DefaultOptions = Options{
	Setup:          Single,
	Duration:       time.Minute,
	FaultEvery:     Span{5 * time.Second, 15 * time.Second},
	Pause:          Span{time.Second, 30 * time.Second},
	Partition:      Span{time.Second, 30 * time.Second},
	Down:           Span{100 * time.Millisecond, 3 * time.Second},
	Nodes:          3,
	Channels:       6,
	Publishers:     3,
	Subscribers:    6,
	Rate:           10,
	KafkaChannels:  3,
	PublishTimeout: 5 * time.Second,
	Catchup:        2 * time.Minute,
	RedisAOF:       "always",
}

// withDefaults returns o with every zero field set from DefaultOptions, and checks it.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions
	if o.Setup == "" {
		o.Setup = d.Setup
	}
	orDefault(&o.Duration, d.Duration)
	orDefault(&o.PublishTimeout, d.PublishTimeout)
	orDefault(&o.Catchup, d.Catchup)
	orDefault(&o.FaultEvery, d.FaultEvery)
	orDefault(&o.Pause, d.Pause)
	orDefault(&o.Partition, d.Partition)
	orDefault(&o.Down, d.Down)
	orDefault(&o.Nodes, d.Nodes)
	orDefault(&o.Channels, d.Channels)
	orDefault(&o.Publishers, d.Publishers)
	orDefault(&o.Subscribers, d.Subscribers)
	orDefault(&o.KafkaChannels, d.KafkaChannels)
	orDefault(&o.Rate, d.Rate)
	orDefault(&o.RedisAOF, d.RedisAOF)
	if o.Setup == Single {
		o.Nodes = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch o.Setup {
	case Single, Redis, NATS:
	default:
		bad("setup %q: want single, redis or nats", o.Setup)
	}
	if o.Setup != Single && (o.Nodes < 2 || o.Nodes > 9) {
		bad("nodes %d: want 2 to 9 in a cluster", o.Nodes)
	}
	if o.Duration < time.Second {
		bad("duration %v: want at least 1s", o.Duration)
	}
	if o.Channels < 1 || o.Channels > 1000 {
		bad("channels %d: want 1 to 1000", o.Channels)
	}
	if o.Publishers < 1 || o.Publishers > o.Channels {
		bad("publishers %d: want 1 to the number of channels (%d): each owns at least one", o.Publishers, o.Channels)
	}
	if o.Subscribers < 1 || o.Subscribers > 1000 {
		bad("subscribers %d: want 1 to 1000", o.Subscribers)
	}
	if o.KafkaChannels < 1 || o.KafkaChannels > 100 {
		bad("kafka channels %d: want 1 to 100", o.KafkaChannels)
	}
	if o.Rate <= 0 || o.Rate > 1000 {
		bad("rate %v: want more than 0, at most 1000 events a second per publisher", o.Rate)
	}
	switch o.RedisAOF {
	case "always", "everysec", "off":
	default:
		bad("redis aof %q: want always, everysec or off", o.RedisAOF)
	}
	if o.PowerCut && o.Setup == Single {
		bad("power cut: only on the redis and nats setups (a single node keeps its history in memory)")
	}
	if o.NATSSync != "" && o.NATSSync != "always" {
		if d, err := time.ParseDuration(o.NATSSync); err != nil || d <= 0 {
			bad("nats sync %q: want always or a duration", o.NATSSync)
		}
	}
	for _, f := range o.Faults {
		switch {
		case !slices.Contains(Faults, f):
			bad("fault %q: want one of %v", f, Faults)
		case f == PowerCut && !o.PowerCut:
			bad("fault power-cut: needs the power cut on (--power-cut)")
		}
	}
	if o.Herald == "" {
		bad("no herald binary given")
	}
	return o, errors.Join(errs...)
}

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
