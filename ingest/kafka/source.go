package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/internal/lograte"
)

// Config is one Kafka source.
type Config struct {
	Brokers []string // seed brokers, host:port
	Topics  []string
	Group   string // the consumer group, shared by every node of a cluster
	// Start is where a partition without a committed offset in the group begins: "earliest"
	// or "latest" (the default).
	Start string
	// DeadLetter is the topic bad records go to, with their reason in the herald-reason
	// header; empty: none.
	DeadLetter string
	// ClientID names this node to the brokers; empty: "herald".
	ClientID string
	// SessionTimeout is how long the group waits for a silent member (a node killed) before
	// giving its partitions to the others; default 10s.
	SessionTimeout time.Duration
	// PollRecords bounds the records handled between two commits; default 500.
	PollRecords int
	// FetchMaxBytes bounds one fetch response, the only one buffered; default 4 MiB.
	FetchMaxBytes int32
	// TLS, when set, connects to the brokers over TLS with this configuration (a CA, a
	// client certificate); nil: plain TCP.
	TLS *tls.Config
	// SASL, when its Mechanism is set, authenticates to the brokers (over TLS, unless the
	// listener is SASL_PLAINTEXT).
	SASL SASL
}

// SASL is a Kafka client's SASL authentication.
type SASL struct {
	Mechanism      string // "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"; empty: none
	User, Password string
}

// mechanism returns the franz-go mechanism of s, nil without one.
func (s SASL) mechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("kafka: SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
}

// Source consumes a Kafka consumer group into a pipeline. Start joins the group and consumes
// until Close, which commits what was handed to the server, leaves the group (its partitions go
// to the other nodes) and waits for the source's goroutines within its ctx.
type Source struct {
	*ingest.Lifecycle
	cfg    Config
	p      *ingest.Pipeline
	cl     *kgo.Client
	log    *slog.Logger
	ctx    context.Context // done once Close is called
	errLog lograte.Limit
}

var _ ingest.Source = (*Source)(nil)

// commitTimeout bounds one commit, also the last one on Close.
const commitTimeout = 10 * time.Second

// New builds the source; it connects when started. The pipeline's dead letter is set to
// cfg.DeadLetter when that is not empty.
func New(cfg Config, p *ingest.Pipeline) (*Source, error) {
	if len(cfg.Brokers) == 0 || len(cfg.Topics) == 0 || cfg.Group == "" {
		return nil, errors.New("kafka: brokers, topics and group are required")
	}
	if cfg.PollRecords <= 0 {
		cfg.PollRecords = 500
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = 4 << 20
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "herald"
	}
	reset := kgo.NewOffset().AtEnd()
	switch cfg.Start {
	case "earliest":
		reset = kgo.NewOffset().AtStart()
	case "", "latest":
	default:
		return nil, fmt.Errorf("kafka: start %q: want earliest or latest", cfg.Start)
	}
	mech, err := cfg.SASL.mechanism()
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, p: p, log: p.Logger()}
	s.Lifecycle, s.ctx = ingest.NewLifecycle(p, func() { s.cl.Close() }, s.run, s.watch)
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)),
		kgo.MaxConcurrentFetches(1),
		kgo.FetchMaxBytes(cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(min(cfg.FetchMaxBytes, 1<<20)),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.RetryBackoffFn(ingest.Backoff),
		kgo.OnPartitionsRevoked(s.dropped),
		kgo.OnPartitionsLost(s.dropped),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // dead letters keep their key's partition
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS.Clone()))
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	s.cl = cl
	if cfg.DeadLetter != "" {
		p.SetDeadLetter(s.deadLetter)
	}
	return s, nil
}

// run polls, hands each poll to the pipeline in order and commits what it did.
func (s *Source) run() {
	var recs []ingest.Record
	var krecs []*kgo.Record
	for s.ctx.Err() == nil {
		fs := s.cl.PollRecords(s.ctx, s.cfg.PollRecords)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, part int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			if s.errLog.Due(time.Now().UnixMilli(), 5000) {
				s.log.Warn("ingest: kafka fetch error, retrying", "topic", topic, "partition", part, "err", err)
			}
		})
		recs, krecs = recs[:0], krecs[:0]
		fs.EachRecord(func(r *kgo.Record) {
			krecs = append(krecs, r)
			recs = append(recs, record(r))
		})
		if len(recs) > 0 {
			n, _ := s.p.Handle(s.ctx, recs)
			s.commit(krecs[:n])
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				s.p.SetLag(p.Topic, p.Partition, p.HighWatermark-p.Records[len(p.Records)-1].Offset-1)
			}
		})
		s.cl.AllowRebalance()
		clear(recs)
		clear(krecs)
	}
}

// commit commits the offsets of krecs, records the pipeline handed on, even while closing.
func (s *Source) commit(krecs []*kgo.Record) {
	if len(krecs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if err := s.cl.CommitRecords(ctx, krecs...); err != nil {
		s.p.CommitFailed()
		if s.errLog.Due(time.Now().UnixMilli(), 1000) {
			s.log.Warn("ingest: kafka commit failed: these records will be delivered again", "err", err, "records", len(krecs))
		}
	}
}

// record is the pipeline's view of r; it aliases r's bytes.
func record(r *kgo.Record) ingest.Record {
	out := ingest.Record{Topic: r.Topic, Partition: r.Partition, Position: ingest.Offset(r.Offset),
		Key: r.Key, Value: r.Value, Time: r.Timestamp}
	if len(r.Headers) > 0 {
		out.Headers = make([]ingest.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = ingest.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

// dropped forgets the lag of partitions this node no longer consumes.
func (s *Source) dropped(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	for t, ps := range parts {
		for _, p := range ps {
			s.p.DropLag(t, p)
		}
	}
}

// watchEvery is how often the source checks that a broker answers, for /health.
const watchEvery = time.Second

// watch keeps the source's state: up while a broker answers, down with the error otherwise.
func (s *Source) watch() {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	var was ingest.State
	for {
		ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
		err := s.cl.Ping(ctx)
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		st := ingest.StateUp
		if err != nil {
			st = ingest.StateDown
		}
		s.p.SetState(st, err)
		switch {
		case st == was:
		case st == ingest.StateDown:
			s.log.Warn("ingest: kafka unreachable, reconnecting with backoff", "err", err)
		case was != "":
			s.log.Info("ingest: kafka reachable again")
		}
		was = st
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deadLetter produces r to the dead-letter topic with its reason and origin in headers.
func (s *Source) deadLetter(ctx context.Context, r *ingest.Record, reason ingest.Reason, detail string) error {
	dl := &kgo.Record{Topic: s.cfg.DeadLetter, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	dl.Headers = append(dl.Headers,
		kgo.RecordHeader{Key: "herald-reason", Value: []byte(reason.String())},
		kgo.RecordHeader{Key: "herald-detail", Value: []byte(detail)},
		kgo.RecordHeader{Key: "herald-topic", Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: "herald-partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: "herald-offset", Value: []byte(r.Position)},
	)
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	return s.cl.ProduceSync(ctx, dl).FirstErr()
}
