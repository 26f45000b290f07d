package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/nats"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/ingest"
	"github.com/herald-rt/herald/internal/busurl"
	"github.com/herald-rt/herald/metrics"
	"github.com/herald-rt/herald/session"
	"github.com/herald-rt/herald/ws"
)

// newNodeID returns a node id for a node started without one: the short host name and eight
// random characters ("web-3-k2m7qz4d"), readable in logs and unique in the cluster.
func newNodeID() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	host = strings.Map(func(r rune) rune {
		if strings.ContainsRune(config.NodeIDChars, r) {
			return r
		}
		return -1
	}, host)
	if host == "" {
		host = "herald"
	}
	if len(host) > 40 {
		host = host[:40]
	}
	return host + "-" + strings.ToLower(rand.Text()[:8])
}

// busLink is a node's connection to its cluster bus, and the history of its history channels
// kept on the same server.
type busLink struct {
	herald.Broker
	history        herald.History // on the Broker's connection: redis.History, nats.History
	mux            *broker.Mux    // routes what the bus brings by kind; the console adds its own
	engine, nodeID string
	url            busurl.URL
	invalid        atomic.Uint64                      // event frames from the bus or its store refused (validFrame)
	rep            atomic.Pointer[cluster.Replicated] // the node's State, once built (versions.go)
}

// newState is how the node shares its state through the bus: a cluster.Replicated, kept for
// /health and the metrics (versions.go).
func (c *busLink) newState(cfg cluster.Config, log *slog.Logger) session.NewState {
	cfg.ValidFrame = c.validFrame
	newState := cluster.ReplicatedState(cfg, c.Broker, c.history, c.mux.Handle, log)
	return func(eng *fanout.Engine) cluster.State {
		st := newState(eng)
		if r, ok := st.(*cluster.Replicated); ok {
			c.rep.Store(r)
		}
		return st
	}
}

// route registers, for a kind of message the bus brings, who receives it.
func (c *busLink) route() func(herald.BusKind, herald.BusHandler) { return c.mux.Handle }

// broker is the bus.
func (c *busLink) broker() herald.Broker { return c.Broker }

// store keeps the history channels' events on the bus's server.
func (c *busLink) store() herald.History { return c.history }

// publisher is where the ingest sources publish: h, which also tells them when the bus
// connection was replaced (NATS) so that they hand off again what it may have lost.
func (c *busLink) publisher(h *session.Server) ingest.Publisher {
	if rc, ok := c.Broker.(ingest.Reconnector); ok {
		return reconnecting{h, rc}
	}
	return h
}

// validFrame is the cluster layer's check of the event frames the bus brings and its store
// keeps (cluster.Config.ValidFrame): one well-formed text frame, nothing else (a close frame
// would close the subscribers' connections). It counts what it refuses.
func (c *busLink) validFrame(frame []byte) bool {
	if ws.ValidTextFrame(frame) {
		return true
	}
	c.invalid.Add(1)
	return false
}

// InvalidFrames is how many event frames validFrame refused (metrics.BusSource).
func (c *busLink) InvalidFrames() uint64 { return c.invalid.Load() }

// startCluster connects to the bus c names (its history streams kept by replicas servers
// of a NATS cluster: history.replicas), its messages routed by kind (busLink.mux) to
// whoever registers for them: the node's cluster.State and its console. Its round trips are
// observed by reg, its state changes logged on log with the URL's secrets redacted. It
// returns even when the bus is unreachable: the engines keep trying, and the node serves
// its own clients meanwhile.
func startCluster(c config.ClusterConfig, replicas int, keyWindow time.Duration, reg *metrics.Registry, metricPrefix string, log *slog.Logger) (*busLink, error) {
	u, err := busurl.Parse(c.URL)
	if err != nil { // validated already
		return nil, fmt.Errorf("cluster.url: %w", err)
	}
	mux := new(broker.Mux)
	common := broker.Common{NodeID: c.NodeID, Prefix: c.Prefix, RoundTrip: reg.BusRoundTrip(metricPrefix), KeyWindow: keyWindow,
		Logger: redactLogger(log, append(u.Secrets, c.Secret, c.AcceptSecret)), Auth: busAuth(c)}
	if files := (broker.TLSFiles{CA: c.TLSCAFile, Cert: c.TLSCertFile, Key: c.TLSKeyFile}); files.Set() {
		if common.TLS, err = files.Config(""); err != nil { // validated already
			return nil, fmt.Errorf("cluster.tls_*: %w", err)
		}
	}
	warnUnsafe(c, u, log)
	link := &busLink{mux: mux, engine: u.Engine, nodeID: c.NodeID, url: u}
	switch u.Engine {
	case "nats":
		var b *nats.Broker
		cfg := nats.Config{URL: c.URL, Common: common, CredsFile: c.NATSCredsFile, NKeySeedFile: c.NATSNKeyFile, HistoryReplicas: replicas,
			PingInterval: c.NATSPingInterval.Duration, PingsOutstanding: c.NATSPingsOutstanding}
		if b, err = nats.New(cfg, mux.Receive); err == nil {
			link.Broker = b
			if link.history, err = nats.NewHistory(b); err != nil {
				_ = b.Close(context.Background())
			}
		}
	case "redis":
		var b *redis.Broker
		if b, err = redis.New(redis.Config{URL: c.URL, Common: common}, mux.Receive); err == nil {
			link.Broker, link.history = b, redis.NewHistory(b)
		}
	}
	if err != nil {
		return nil, errors.New(redact(err.Error(), u.Secrets))
	}
	reg.AttachBus(metricPrefix, link)
	unsealed, plain := c.Secret == "", plaintext(c, u)
	reg.GaugeFunc(metricPrefix+"cluster_unsealed", "1 while the cluster runs without cluster.secret (cluster.insecure): bus messages unsealed, whoever can publish on the bus is believed.", nil,
		func() float64 { return b2f(unsealed) })
	reg.GaugeFunc(metricPrefix+"cluster_bus_plaintext", "1 while the bus is reached without TLS on a host off this machine: its traffic crosses the network in clear.", nil,
		func() float64 { return b2f(plain) })
	return link, nil
}

// plaintext reports whether the bus is reached without TLS on a server off this machine:
// neither rediss:// nor tls://, nor TLS files for a NATS server (which turn TLS on).
func plaintext(c config.ClusterConfig, u busurl.URL) bool {
	secured := u.TLS || u.Engine == "nats" && (c.TLSCAFile != "" || c.TLSCertFile != "")
	return !secured && !u.Loopback()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// warnUnsafe warns, loudly, of a cluster run without a secret (cluster.insecure), and of a
// bus reached in clear across the network.
func warnUnsafe(c config.ClusterConfig, u busurl.URL, log *slog.Logger) {
	if c.Secret == "" {
		log.Warn("CLUSTER BUS UNSEALED: cluster.insecure is set and cluster.secret is not; "+
			"whoever can publish on the bus can send any event to any client, add presence members and close connections, "+
			"and whoever can read it reads every private and presence event: make a secret (openssl rand -hex 32), "+
			"set cluster.secret on every node and drop cluster.insecure (docs/security.md)",
			"engine", u.Engine, "url", u.Redacted, "on_this_machine", u.Loopback())
	}
	if plaintext(c, u) {
		why := "its traffic (every event, private and presence ones included, unless cluster.encrypt) crosses the network in clear"
		if c.Encrypt {
			why = "its payloads are encrypted (cluster.encrypt) but channel names, node ids and the bus's own credentials cross the network in clear"
		}
		log.Warn("cluster bus without TLS on a host off this machine: "+why+"; use rediss:// or tls:// (docs/cluster.md)",
			"engine", u.Engine, "url", u.Redacted)
	}
}

// busAuth is the bus's authentication: none without a secret.
func busAuth(c config.ClusterConfig) broker.AuthConfig {
	if c.Secret == "" {
		return broker.AuthConfig{}
	}
	a := broker.AuthConfig{Secret: []byte(c.Secret), Encrypt: c.Encrypt, MaxSkew: c.ClockSkew.Duration}
	if c.AcceptSecret != "" {
		a.Accept = [][]byte{[]byte(c.AcceptSecret)}
	}
	return a
}

// health is the bus's part of /health: with several Redis shards, each one's state; the
// cluster's nodes and the features in use.
func (c *busLink) health() *httpapi.ClusterHealth {
	st := c.Stats()
	h := &httpapi.ClusterHealth{Engine: c.engine, NodeID: c.nodeID, Connected: st.Connected, Interests: st.Interests}
	h.Nodes, h.FeaturesInUse = c.nodes()
	if rb, ok := c.Broker.(*redis.Broker); ok && len(rb.Shards()) > 1 {
		h.Mode = string(rb.Mode())
		for _, s := range rb.Shards() {
			h.Shards = append(h.Shards, httpapi.ShardHealth{ID: s.ID, Connected: s.Connected, Interests: s.Interests})
		}
	}
	return h
}

// ShardsConnected is how many of the bus's shards are connected, of how many: 0, 0 for a bus
// of one connection (metrics' bus_shards).
func (c *busLink) ShardsConnected() (connected, total int) {
	rb, ok := c.Broker.(*redis.Broker)
	if !ok || len(rb.Shards()) < 2 {
		return 0, 0
	}
	for _, s := range rb.Shards() {
		total++
		if s.Connected {
			connected++
		}
	}
	return connected, total
}

// startLine adds the cluster to the start line's attributes.
func (c *busLink) startLine(attrs []any) []any {
	return append(attrs, slog.Group("cluster", "engine", c.engine, "node_id", c.nodeID, "url", c.url.Redacted))
}

// close disconnects from the bus within ctx, and logs and returns what it could not do.
func (c *busLink) close(ctx context.Context, log *slog.Logger) error {
	err := c.Close(ctx)
	if err != nil {
		log.Warn("cluster bus close", "err", err)
	}
	return err
}

// redact replaces every secret in s.
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
}

// redactLogger returns log, or with secrets, a logger that replaces them wherever they appear
// in a message or a value: the engines log the bus URL they were given, and errors that may
// quote it.
func redactLogger(log *slog.Logger, secrets []string) *slog.Logger {
	var keep []string
	for _, s := range secrets {
		if s != "" {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return log
	}
	return slog.New(redactHandler{log.Handler(), keep})
}

// redactHandler is a slog.Handler that redacts secrets before handing records on.
type redactHandler struct {
	next    slog.Handler
	secrets []string
}

func (r redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return r.next.Enabled(ctx, l) }

func (r redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, redact(rec.Message, r.secrets), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.next.Handle(ctx, out)
}

func (r redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = r.attr(a)
	}
	return redactHandler{r.next.WithAttrs(clean), r.secrets}
}

func (r redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{r.next.WithGroup(name), r.secrets}
}

// attr redacts one attribute's value: strings, errors, anything that prints itself, groups.
func (r redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact(v.String(), r.secrets))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = r.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, redact(x.Error(), r.secrets))
		case fmt.Stringer:
			return slog.String(a.Key, redact(x.String(), r.secrets))
		}
	}
	return a
}
