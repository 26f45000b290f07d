package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/kafka"
	"github.com/herald-rt/herald/ingest/redis"
	"github.com/herald-rt/herald/internal/busurl"
	"github.com/herald-rt/herald/metrics"
)

// ingestSources are the node's Kafka and Redis sources (ingest), publishing into the server.
// They start after the server and stop before it: each commits what it handed on, then leaves
// its group.
type ingestSources struct {
	cfg    []config.IngestConfig
	nodeID string           // names this node to the brokers (Kafka client id, Redis consumer name)
	pub    ingest.Publisher // the started server
	apps   herald.AppStore
	reg    *metrics.Registry
	prefix string // of the metrics
	log    *slog.Logger

	list []ingest.Source // the ones start started, for stop and health
}

// newIngestSources configures the sources of the apps of apps, publishing into pub: the
// started server, as the bus link hands it to them (link.publisher).
func newIngestSources(cfg config.Config, nodeID string, pub ingest.Publisher, apps herald.AppStore, reg *metrics.Registry, log *slog.Logger) *ingestSources {
	return &ingestSources{cfg: cfg.Ingest, nodeID: nodeID, pub: pub, apps: apps, reg: reg, prefix: cfg.Metrics.Prefix, log: log}
}

// start builds the configured sources and starts them.
func (s *ingestSources) start() error {
	if len(s.cfg) == 0 {
		return nil
	}
	if err := s.build(s.pub); err != nil {
		s.log.Error("start ingest", "err", err)
		return err
	}
	s.reg.AttachIngest(s.prefix, s.stats)
	for i, src := range s.list {
		src.Start()
		s.log.Info("ingest source started", "source", s.cfg[i].Name, "app_id", s.cfg[i].App, "from", describeSource(s.cfg[i]))
	}
	return nil
}

// reconnecting is a Publisher whose bus is an ingest.Reconnector.
type reconnecting struct {
	ingest.Publisher
	ingest.Reconnector
}

// build builds every source, publishing into pub; when one fails, it closes those built.
func (s *ingestSources) build(pub ingest.Publisher) error {
	handoff := s.reg.IngestHandoff(s.prefix)
	for _, c := range s.cfg {
		app, ok := s.apps.AppByID(c.App)
		if !ok { // an app store's apps are checked here, not with the configuration
			return fmt.Errorf("ingest %s: app %q is not in the app store", c.Name, c.App)
		}
		t := compileTemplates(&c)
		pc := ingest.Config{Name: c.Name, App: app, Format: t.format, Channel: t.channel, Event: t.event, Data: t.data,
			AllowChannels: c.AllowChannels, Handoff: handoff(c.Name), Logger: s.log}
		var src ingest.Source
		var err error
		switch {
		case c.Kafka != nil:
			pc.Kind = "kafka"
			kc := kafka.Config{Brokers: c.Kafka.Brokers, Topics: c.Kafka.Topics, Group: c.Kafka.Group,
				Start: c.Kafka.Start, DeadLetter: c.DeadLetter, ClientID: s.nodeID, SessionTimeout: c.Kafka.SessionTimeout.Duration,
				SASL: kafka.SASL{Mechanism: c.Kafka.SASLMechanism, User: c.Kafka.SASLUser, Password: c.Kafka.SASLPassword}}
			if c.Kafka.TLS {
				kc.TLS, err = broker.TLSFiles{CA: c.Kafka.TLSCAFile, Cert: c.Kafka.TLSCertFile, Key: c.Kafka.TLSKeyFile}.Config("") // validated already
			}
			if err == nil {
				pc.Logger = redactLogger(s.log, []string{c.Kafka.SASLPassword})
				var p *ingest.Pipeline
				if p, err = ingest.New(pc, pub); err == nil {
					src, err = kafka.New(kc, p)
				}
			}
		case c.Redis != nil:
			pc.Kind = "redis_stream"
			if len(c.Redis.Subscribe) > 0 {
				pc.Kind = "redis_pubsub"
			}
			u, _ := busurl.Parse(c.Redis.URL)
			pc.Logger = redactLogger(s.log, u.Secrets)
			var p *ingest.Pipeline
			if p, err = ingest.New(pc, pub); err == nil {
				src, err = redis.New(redis.Config{URL: c.Redis.URL, Stream: c.Redis.Stream, Group: c.Redis.Group,
					Subscribe: c.Redis.Subscribe, Start: c.Redis.Start, Consumer: s.nodeID, ClaimIdle: c.Redis.ClaimIdle.Duration, DeadLetter: c.DeadLetter}, p)
				if err != nil {
					err = fmt.Errorf("%s", redact(err.Error(), u.Secrets))
				}
			}
		}
		if err != nil {
			_ = s.stop(context.Background())
			return fmt.Errorf("ingest %s: %w", c.Name, err)
		}
		s.list = append(s.list, src)
	}
	return nil
}

// describeSource says where a source reads, for the log; never a URL's password.
func describeSource(c config.IngestConfig) string {
	if c.Kafka != nil {
		return "kafka " + strings.Join(c.Kafka.Brokers, ",") + " topics " + strings.Join(c.Kafka.Topics, ",") + " group " + c.Kafka.Group
	}
	u, _ := busurl.Parse(c.Redis.URL)
	if c.Redis.Stream != "" {
		return "redis " + u.Redacted + " stream " + c.Redis.Stream + " group " + c.Redis.Group
	}
	return "redis " + u.Redacted + " subscribe " + strings.Join(c.Redis.Subscribe, ",")
}

func (s *ingestSources) stats() []ingest.Stats {
	out := make([]ingest.Stats, len(s.list))
	for i, src := range s.list {
		out[i] = src.Stats()
	}
	return out
}

// health is the sources' part of /health.
func (s *ingestSources) health() []httpapi.IngestHealth {
	var out []httpapi.IngestHealth
	for _, st := range s.stats() {
		h := httpapi.IngestHealth{Name: st.Name, Kind: st.Kind, State: string(st.State), Error: st.Error, Consumed: st.Consumed}
		for _, l := range st.Lag {
			h.Lag += l.Records
		}
		out = append(out, h)
	}
	return out
}

// stop stops every source within ctx: each commits what it handed on and leaves its group.
func (s *ingestSources) stop(ctx context.Context) error {
	var errs []error
	for _, src := range s.list {
		if err := src.Close(ctx); err != nil {
			s.log.Warn("ingest source close", "source", src.Stats().Name, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// compileTemplates compiles a validated source's templates.
func compileTemplates(s *config.IngestConfig) ingestTemplates {
	if s.Format == "pusher" {
		return ingestTemplates{format: ingest.FormatPusher}
	}
	t := ingestTemplates{}
	t.channel, _ = ingest.ParseTemplate(s.Channel)
	t.event, _ = ingest.ParseTemplate(s.Event)
	if s.Data != "" {
		t.data, _ = ingest.ParseTemplate(s.Data)
	}
	return t
}

// ingestTemplates are one source's compiled templates.
type ingestTemplates struct {
	format               ingest.Format
	channel, event, data *ingest.Template
}
