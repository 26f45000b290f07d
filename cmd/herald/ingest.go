package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/ingest/kafka"
	"github.com/herald-rt/herald/ingest/redis"
	"github.com/herald-rt/herald/metrics"
)

// ingestSources are the node's running ingest sources.
type ingestSources struct {
	list []ingest.Source
}

// startIngest builds and starts the configured sources, publishing into pub (the hub).
// nodeID names this node to the brokers (Kafka client id, Redis consumer name).
func startIngest(cfg Config, nodeID string, pub ingest.Publisher, apps *herald.StaticApps, reg *metrics.Registry, log *slog.Logger) (*ingestSources, error) {
	s := &ingestSources{}
	if len(cfg.Ingest) == 0 {
		return s, nil
	}
	handoff := reg.IngestHandoff(cfg.Metrics.Prefix)
	for _, c := range cfg.Ingest {
		app, _ := apps.AppByID(c.App)
		t := c.templates()
		pc := ingest.Config{Name: c.Name, App: app, Format: t.format, Channel: t.channel, Event: t.event, Data: t.data,
			Handoff: handoff(c.Name), Logger: log}
		var src ingest.Source
		var err error
		switch {
		case c.Kafka != nil:
			pc.Kind = "kafka"
			var p *ingest.Pipeline
			if p, err = ingest.New(pc, pub); err == nil {
				src, err = kafka.New(kafka.Config{Brokers: c.Kafka.Brokers, Topics: c.Kafka.Topics, Group: c.Kafka.Group,
					Start: c.Kafka.Start, DeadLetter: c.DeadLetter, ClientID: nodeID, SessionTimeout: c.Kafka.SessionTimeout.Duration}, p)
			}
		case c.Redis != nil:
			pc.Kind = "redis_stream"
			if len(c.Redis.Subscribe) > 0 {
				pc.Kind = "redis_pubsub"
			}
			u, _ := parseBusURL(c.Redis.URL)
			pc.Logger = redactLogger(log, u.secrets)
			var p *ingest.Pipeline
			if p, err = ingest.New(pc, pub); err == nil {
				src, err = redis.New(redis.Config{URL: c.Redis.URL, Stream: c.Redis.Stream, Group: c.Redis.Group,
					Subscribe: c.Redis.Subscribe, Start: c.Redis.Start, Consumer: nodeID, ClaimIdle: c.Redis.ClaimIdle.Duration, DeadLetter: c.DeadLetter}, p)
				if err != nil {
					err = fmt.Errorf("%s", redact(err.Error(), u.secrets))
				}
			}
		}
		if err != nil {
			s.close(context.Background(), log)
			return nil, fmt.Errorf("ingest %s: %w", c.Name, err)
		}
		s.list = append(s.list, src)
	}
	reg.AttachIngest(cfg.Metrics.Prefix, s.stats)
	for i, src := range s.list {
		src.Start()
		log.Info("ingest source started", "source", cfg.Ingest[i].Name, "app_id", cfg.Ingest[i].App, "from", describeSource(cfg.Ingest[i]))
	}
	return s, nil
}

// describeSource says where a source reads, for the log; never a URL's password.
func describeSource(c IngestConfig) string {
	if c.Kafka != nil {
		return "kafka " + strings.Join(c.Kafka.Brokers, ",") + " topics " + strings.Join(c.Kafka.Topics, ",") + " group " + c.Kafka.Group
	}
	u, _ := parseBusURL(c.Redis.URL)
	if c.Redis.Stream != "" {
		return "redis " + u.redacted + " stream " + c.Redis.Stream + " group " + c.Redis.Group
	}
	return "redis " + u.redacted + " subscribe " + strings.Join(c.Redis.Subscribe, ",")
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

// close stops every source within ctx: each commits what it handed on and leaves its group.
func (s *ingestSources) close(ctx context.Context, log *slog.Logger) {
	for _, src := range s.list {
		if err := src.Close(ctx); err != nil {
			log.Warn("ingest source close", "source", src.Stats().Name, "err", err)
		}
	}
}
