package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/internal/lograte"
)

// Config is one Redis source: Stream with Group, or Subscribe.
type Config struct {
	URL       string
	Stream    string
	Group     string
	Subscribe []string // pub/sub patterns
	// Consumer is this node's name in the group; empty: "herald".
	Consumer string
	// Start is where a group created by herald begins: "earliest" (the whole stream) or
	// "latest" (the default: entries added from now on).
	Start string
	// ClaimIdle is how long an entry stays pending with another consumer before this one
	// claims it; default 30s.
	ClaimIdle time.Duration
	// DeadLetter is the stream bad entries are added to (XADD), with reason, detail,
	// stream and id fields beside the entry's own; empty: none.
	DeadLetter string
	// Count bounds the entries read at once; default 500.
	Count int
}

// Source reads a Redis stream or pub/sub patterns into a pipeline. Start connects and
// consumes until Close, which stops consuming (acknowledging what was handed on) and waits
// within its ctx.
type Source struct {
	*ingest.Lifecycle
	cfg    Config
	opt    rueidis.ClientOption
	p      *ingest.Pipeline
	log    *slog.Logger
	ctx    context.Context // done once Close is called
	errLog lograte.Limit

	client rueidis.Client // set by run once connected
}

var _ ingest.Source = (*Source)(nil)

// New builds the source; it connects when started.
func New(cfg Config, p *ingest.Pipeline) (*Source, error) {
	opt, err := rueidis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis: url: %w", err)
	}
	if (cfg.Stream == "") == (len(cfg.Subscribe) == 0) {
		return nil, errors.New("redis: want a stream or subscribe patterns")
	}
	if cfg.Stream != "" && cfg.Group == "" {
		return nil, errors.New("redis: a stream needs a group")
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "herald"
	}
	if cfg.ClaimIdle <= 0 {
		cfg.ClaimIdle = 30 * time.Second
	}
	if cfg.Count <= 0 {
		cfg.Count = 500
	}
	switch cfg.Start {
	case "", "latest", "earliest":
	default:
		return nil, fmt.Errorf("redis: start %q: want earliest or latest", cfg.Start)
	}
	opt.DisableCache = true
	opt.ForceSingleClient = true
	opt.ClientName = "herald-ingest-" + cfg.Consumer
	if cfg.Stream == "" {
		// A lost connection ends Receive, instead of rueidis subscribing again by itself
		// unseen: the source reports down while Redis is unreachable, as in stream mode.
		opt.DisableRetry = true
	}
	s := &Source{cfg: cfg, opt: opt, p: p, log: p.Logger()}
	s.Lifecycle, s.ctx = ingest.NewLifecycle(p, nil, s.run)
	if cfg.DeadLetter != "" {
		p.SetDeadLetter(s.deadLetter)
	}
	return s, nil
}

// run connects, with backoff, and consumes; after a failure it starts again from the
// pending entries.
func (s *Source) run() {
	defer func() {
		if s.client != nil {
			s.client.Close()
		}
	}()
	for n := 0; s.ctx.Err() == nil; n++ {
		var err error
		if s.client == nil {
			s.client, err = rueidis.NewClient(s.opt)
		}
		if err == nil {
			if s.cfg.Stream != "" {
				err = s.stream(&n)
			} else {
				err = s.subscribe(&n)
			}
		}
		if s.ctx.Err() != nil {
			return
		}
		s.p.SetState(ingest.StateDown, err)
		if s.errLog.Due(time.Now().UnixMilli(), 5000) {
			s.log.Warn("ingest: redis unreachable, reconnecting with backoff", "err", err)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(ingest.Backoff(n)):
		}
	}
}

// stream reads the stream in the group until an error or Close; it sets *n to 0 once
// connected.
func (s *Source) stream(n *int) error {
	c, ctx, cfg := s.client, s.ctx, s.cfg
	from := "$"
	if cfg.Start == "earliest" {
		from = "0"
	}
	err := c.Do(ctx, c.B().XgroupCreate().Key(cfg.Stream).Group(cfg.Group).Id(from).Mkstream().Build()).Error()
	if err != nil && !rueidis.IsRedisBusyGroup(err) {
		return err
	}
	s.p.SetState(ingest.StateUp, nil)
	*n = 0
	// This consumer's own pending entries first (a restart under the same name).
	for {
		got, err := s.read("0", false)
		if err != nil || got == 0 {
			if err != nil {
				return err
			}
			break
		}
	}
	nextClaim := time.Now()
	for ctx.Err() == nil {
		if time.Now().After(nextClaim) {
			if err := s.claim(); err != nil {
				return err
			}
			s.lag()
			s.forget()
			nextClaim = time.Now().Add(max(s.cfg.ClaimIdle/2, 100*time.Millisecond))
		}
		if _, err := s.read(">", true); err != nil {
			return err
		}
	}
	return nil
}

// blockFor is how long one XREADGROUP waits for new entries.
const blockFor = time.Second

// read reads entries after id (">" for new ones, "0" for this consumer's pending ones),
// hands them on and acknowledges them; it returns how many it read.
func (s *Source) read(id string, block bool) (int, error) {
	c, cfg := s.client, s.cfg
	b := c.B().Xreadgroup().Group(cfg.Group, cfg.Consumer).Count(int64(cfg.Count))
	var cmd rueidis.Completed
	if block {
		cmd = b.Block(blockFor.Milliseconds()).Streams().Key(cfg.Stream).Id(id).Build()
	} else {
		cmd = b.Streams().Key(cfg.Stream).Id(id).Build()
	}
	res, err := c.Do(s.ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		if s.ctx.Err() != nil {
			return 0, nil
		}
		return 0, err
	}
	entries := res[cfg.Stream]
	if block && len(entries) > 0 && len(entries) < cfg.Count {
		// Redis may wake a blocked reader in the middle of a producer's pipeline: what
		// followed is taken now, so that one batch of events goes to the server, as from Kafka.
		more, err := c.Do(s.ctx, c.B().Xreadgroup().Group(cfg.Group, cfg.Consumer).Count(int64(cfg.Count-len(entries))).
			Streams().Key(cfg.Stream).Id(">").Build()).AsXRead()
		if err == nil {
			entries = append(entries, more[cfg.Stream]...)
		}
	}
	return len(entries), s.handle(entries)
}

// claim takes the entries pending with other consumers for ClaimIdle or longer and hands
// them on, in id order.
func (s *Source) claim() error {
	c, cfg := s.client, s.cfg
	cursor := "0-0"
	for s.ctx.Err() == nil {
		arr, err := c.Do(s.ctx, c.B().Xautoclaim().Key(cfg.Stream).Group(cfg.Group).Consumer(cfg.Consumer).
			MinIdleTime(strconv.FormatInt(cfg.ClaimIdle.Milliseconds(), 10)).Start(cursor).Count(int64(cfg.Count)).Build()).ToArray()
		if err != nil {
			return err
		}
		if len(arr) < 2 {
			return errors.New("redis: XAUTOCLAIM answered fewer than 2 elements")
		}
		if cursor, err = arr[0].ToString(); err != nil {
			return err
		}
		entries, err := arr[1].AsXRange()
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			s.p.Reclaimed(len(entries))
			s.log.Info("ingest: claimed entries left pending by another consumer", "stream", cfg.Stream, "entries", len(entries))
		}
		if err := s.handle(entries); err != nil {
			return err
		}
		if cursor == "0-0" {
			return nil
		}
	}
	return nil
}

// handle hands entries to the pipeline and acknowledges those it did.
func (s *Source) handle(entries []rueidis.XRangeEntry) error {
	if len(entries) == 0 {
		return nil
	}
	recs := make([]ingest.Record, 0, len(entries))
	ids := make([]string, 0, len(entries))
	var gone []string // deleted from the stream while pending: nothing to deliver
	for _, e := range entries {
		if e.FieldValues == nil {
			gone = append(gone, e.ID)
			continue
		}
		recs = append(recs, s.record(e))
		ids = append(ids, e.ID)
	}
	n, _ := s.p.Handle(s.ctx, recs)
	return s.ack(append(gone, ids[:n]...))
}

// ack acknowledges ids, even while closing.
func (s *Source) ack(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := s.client
	if err := c.Do(ctx, c.B().Xack().Key(s.cfg.Stream).Group(s.cfg.Group).Id(ids...).Build()).Error(); err != nil {
		s.p.CommitFailed()
		return err
	}
	return nil
}

// record is the pipeline's view of a stream entry: its "value" field is the value (else
// a JSON object of all its fields), its "key" field the key, every field a header.
func (s *Source) record(e rueidis.XRangeEntry) ingest.Record {
	r := ingest.Record{Topic: s.cfg.Stream, Position: e.ID}
	if ms, _, ok := strings.Cut(e.ID, "-"); ok {
		if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
			r.Time = time.UnixMilli(v)
		}
	}
	keys := make([]string, 0, len(e.FieldValues))
	for k := range e.FieldValues {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.Headers = append(r.Headers, ingest.Header{Key: k, Value: []byte(e.FieldValues[k])})
	}
	if k, ok := e.FieldValues["key"]; ok {
		r.Key = []byte(k)
	}
	if v, ok := e.FieldValues["value"]; ok {
		r.Value = []byte(v)
	} else {
		r.Value, _ = json.Marshal(e.FieldValues) // sorted keys
	}
	return r
}

// lag records the group's lag (Redis 7: entries not yet delivered to the group).
func (s *Source) lag() {
	c := s.client
	groups, err := c.Do(s.ctx, c.B().XinfoGroups().Key(s.cfg.Stream).Build()).ToArray()
	if err != nil {
		return
	}
	for _, g := range groups {
		m, err := g.AsMap()
		if err != nil {
			continue
		}
		name, lag := m["name"], m["lag"]
		if g, _ := name.ToString(); g != s.cfg.Group {
			continue
		}
		if lag, err := lag.AsInt64(); err == nil {
			s.p.SetLag(s.cfg.Stream, 0, lag)
		}
	}
}

// forgetAfter is how long a consumer of the group with nothing pending must have been idle
// before it is deleted (a node that left, or started under a new generated name). A live one
// reads every blockFor; deleting one that holds nothing is harmless anyway (Redis creates it
// again on its next read).
func (s *Source) forgetAfter() time.Duration { return max(10*s.cfg.ClaimIdle, 3*blockFor) }

// forget deletes the group's consumers that hold nothing and have been idle for forgetAfter,
// so that nodes started under new names do not pile up in the group.
func (s *Source) forget() {
	c := s.client
	consumers, err := c.Do(s.ctx, c.B().XinfoConsumers().Key(s.cfg.Stream).Group(s.cfg.Group).Build()).ToArray()
	if err != nil {
		return
	}
	for _, m := range consumers {
		f, err := m.AsMap()
		if err != nil {
			continue
		}
		name, pending, idle := f["name"], f["pending"], f["idle"]
		n, _ := name.ToString()
		p, err1 := pending.AsInt64()
		ms, err2 := idle.AsInt64()
		if n == s.cfg.Consumer || err1 != nil || err2 != nil || p != 0 || time.Duration(ms)*time.Millisecond < s.forgetAfter() {
			continue
		}
		_ = c.Do(s.ctx, c.B().XgroupDelconsumer().Key(s.cfg.Stream).Group(s.cfg.Group).Consumername(n).Build()).Error()
	}
}

// subscribe receives messages on the patterns until an error or Close; it sets *n to 0 once
// subscribed.
func (s *Source) subscribe(n *int) error {
	c := s.client
	// Up once Redis confirms the subscription (a hook on the client's reading goroutine).
	var subscribed atomic.Bool
	ctx := rueidis.WithOnSubscriptionHook(s.ctx, func(sub rueidis.PubSubSubscription) {
		if sub.Kind == "psubscribe" {
			subscribed.Store(true)
			s.p.SetState(ingest.StateUp, nil)
		}
	})
	recs := make([]ingest.Record, 1)
	err := c.Receive(ctx, c.B().Psubscribe().Pattern(s.cfg.Subscribe...).Build(), func(m rueidis.PubSubMessage) {
		recs[0] = ingest.Record{Topic: m.Channel, Value: []byte(m.Message)}
		_, _ = s.p.Handle(s.ctx, recs)
	})
	if subscribed.Load() {
		*n = 0
	}
	if s.ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("subscription ended")
	}
	return err
}

// deadLetter adds r to the dead-letter stream with its reason and origin.
func (s *Source) deadLetter(ctx context.Context, r *ingest.Record, reason ingest.Reason, detail string) error {
	c := s.client
	if c == nil {
		return errors.New("redis: not connected")
	}
	fv := c.B().Xadd().Key(s.cfg.DeadLetter).Id("*").FieldValue().
		FieldValue("herald_reason", reason.String()).FieldValue("herald_detail", detail).
		FieldValue("herald_stream", r.Topic).FieldValue("herald_id", r.Position).
		FieldValue("value", string(r.Value))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Do(ctx, fv.Build()).Error()
}
