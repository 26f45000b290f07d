package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/lograte"
)

// Publisher is where events go: the server. Publish is all or nothing on one node; in a cluster
// an error may follow a partial hand-off to the bus (a retry then duplicates, which at least
// once allows).
type Publisher interface {
	Publish(appID string, evs ...herald.Event) error
}

// Observer receives one measurement in seconds; a Prometheus histogram satisfies it.
type Observer interface{ Observe(float64) }

// DeadLetter writes a bad record, with its reason, to the source's dead-letter topic or
// stream. It returns once the write is acknowledged.
type DeadLetter func(ctx context.Context, r *Record, reason Reason, detail string) error

// Config is one source's pipeline.
type Config struct {
	Name string // the source's name, in logs, metrics and /health
	Kind string // "kafka", "redis_stream" or "redis_pubsub"
	App  *herald.App
	// Format picks templates or the pusher format. With FormatTemplate, Channel and Event are
	// required and Data is optional (nil: the record's value as it is); with FormatPusher
	// they are nil.
	Format               Format
	Channel, Event, Data *Template
	// AllowChannels are globs ('*' matches any run of characters) of the channels the source
	// may publish to; a record naming another is bad (ReasonChannelNotAllowed). Empty: public
	// channels only (no private-, private-encrypted-, presence- or #server-to-user- channel).
	AllowChannels []string
	// BatchEvents bounds the events handed to the server in one Publish; 0 means 64.
	BatchEvents int
	// Handoff, when set, observes record time → its events handed to the server (on a
	// clustered node: flushed to the bus), in seconds. The rest of the way, record time →
	// frames queued for the subscribers, the server observes itself on every node that delivers
	// the events (session.Config.OriginLatency), from each event's Origin: the record's Time.
	Handoff Observer
	Logger  *slog.Logger
}

// Pipeline turns one source's records into events and hands them to a Publisher.
type Pipeline struct {
	cfg    Config
	pub    Publisher
	limits herald.Limits
	log    *slog.Logger
	badLog lograte.Limit
	retLog lograte.Limit
	stats  counters
	evs    []herald.Event
	dead   DeadLetter

	rc   Reconnector // pub's, if it is one
	mu   sync.Mutex  // held by Handle and by watch while it hands off again
	sent resent      // under mu
}

// retryMax is the longest pause between two attempts to hand events to a refusing server.
const retryMax = time.Second

// New builds the pipeline of cfg publishing to pub.
func New(cfg Config, pub Publisher) (*Pipeline, error) {
	if cfg.App == nil {
		return nil, errors.New("ingest: no app")
	}
	if cfg.Format == FormatTemplate && (cfg.Channel == nil || cfg.Event == nil) {
		return nil, errors.New("ingest: channel and event templates are required")
	}
	if cfg.BatchEvents <= 0 {
		cfg.BatchEvents = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{cfg: cfg, pub: pub, limits: cfg.App.Limits.WithDefaults(),
		log: cfg.Logger.With("source", cfg.Name, "app_id", cfg.App.ID)}
	p.rc, _ = pub.(Reconnector)
	if p.rc != nil {
		p.sent.conn = p.rc.Connection()
	}
	p.stats.init(cfg.Name, cfg.Kind)
	return p, nil
}

// SetDeadLetter sets where bad records go; call it before the first Handle.
func (p *Pipeline) SetDeadLetter(d DeadLetter) { p.dead = d }

// Logger is the pipeline's logger, with the source's name.
func (p *Pipeline) Logger() *slog.Logger { return p.log }

// Handle turns recs, in order, into events and hands them to the publisher, retrying while it
// refuses them (backpressure: Handle does not return, so the source fetches nothing more). Bad
// records are counted, logged at most once a second, sent to the dead letter if any, and
// done. It returns how many of recs (a prefix) are done: handed to the publisher or skipped
// as bad, and safe to commit; fewer than len(recs) only with ctx's error.
func (p *Pipeline) Handle(ctx context.Context, recs []Record) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.consumed.Add(uint64(len(recs)))
	evs := p.evs[:0]
	from := 0 // first record whose events are in evs
	for i := range recs {
		r := &recs[i]
		if len(evs) >= p.cfg.BatchEvents {
			if err := p.flush(ctx, evs, recs[from:i]); err != nil {
				return from, err
			}
			evs, from = evs[:0], i
		}
		var b *badRecord
		if evs, b = p.events(evs, r); b == nil {
			continue
		}
		if err := p.flush(ctx, evs, recs[from:i]); err != nil {
			return from, err
		}
		evs, from = evs[:0], i
		if err := p.badRecord(ctx, r, b); err != nil {
			return from, err
		}
		from = i + 1
	}
	if err := p.flush(ctx, evs, recs[from:]); err != nil {
		return from, err
	}
	clear(evs)
	p.evs = evs[:0]
	return len(recs), nil
}

// flush hands evs, the events of recs, to the publisher (handoff) and observes the records'
// hand-off latency.
func (p *Pipeline) flush(ctx context.Context, evs []herald.Event, recs []Record) error {
	if len(evs) == 0 {
		return nil
	}
	if err := p.handoff(ctx, evs); err != nil {
		return err
	}
	if p.cfg.Handoff != nil {
		now := time.Now()
		for i := range recs {
			if !recs[i].Time.IsZero() {
				p.cfg.Handoff.Observe(max(now.Sub(recs[i].Time).Seconds(), 0))
			}
		}
	}
	return nil
}

// handoff hands evs to the publisher, retrying with growing pauses until it takes them or
// ctx ends. With a Reconnector whose connection changed, the events a lost connection may
// have lost go first, in the same Publish (resend.go). Called with mu held.
func (p *Pipeline) handoff(ctx context.Context, evs []herald.Event) error {
	wait := 5 * time.Millisecond
	var t *time.Timer
	var conn uint64
	again := 0 // of evs, the first events, handed off again
	for {
		if p.rc != nil {
			conn = p.rc.Connection()
			if redo := p.sent.again(conn, time.Now().UnixNano(), evs); redo != nil {
				again += len(redo) - len(evs)
				evs = redo
				p.log.Info("ingest: the cluster bus connection was replaced; handing off again the events it may have lost",
					"events", again)
			}
		}
		if len(evs) == 0 {
			return nil
		}
		err := p.pub.Publish(p.cfg.App.ID, evs...)
		if err == nil {
			break
		}
		p.stats.retries.Add(1)
		p.stats.setPaused(true)
		if p.retLog.Due(time.Now().UnixMilli(), 1000) {
			p.log.Warn("ingest: the node refused events, retrying (fetching is paused)", "err", err, "events", len(evs))
		}
		if t == nil {
			t = time.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			p.sent.release()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
	}
	p.stats.setPaused(false)
	p.stats.published.Add(uint64(len(evs) - again))
	p.stats.resent.Add(uint64(again))
	if p.rc != nil {
		p.sent.keep(evs, conn, time.Now().UnixNano())
		if again > 0 {
			p.sent.release()
		}
	}
	return nil
}

// deadLetterAttempts is how often a dead letter is tried before the record is skipped
// without one (counted in DeadLetterErrors).
const deadLetterAttempts = 3

// badRecord counts, logs (rate-limited) and dead-letters one bad record.
func (p *Pipeline) badRecord(ctx context.Context, r *Record, b *badRecord) error {
	p.stats.bad[b.reason].Add(1)
	if p.badLog.Due(time.Now().UnixMilli(), 1000) {
		p.log.Warn("ingest: bad record skipped (at most one line per second)", "reason", b.reason.String(), "detail", b.detail,
			"topic", r.Topic, "partition", r.Partition, "offset", r.Position, "bad_records", p.stats.badTotal())
	}
	if p.dead == nil {
		return nil
	}
	var err error
	for attempt := 0; attempt < deadLetterAttempts; attempt++ {
		if err = p.dead(ctx, r, b.reason, b.detail); err == nil {
			p.stats.deadLettered.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
	p.stats.deadLetterErrs.Add(1)
	p.log.Error("ingest: dead letter failed, record skipped without one", "err", err,
		"topic", r.Topic, "partition", r.Partition, "offset", r.Position)
	return nil
}
