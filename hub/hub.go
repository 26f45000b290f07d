package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/internal/lograte"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// Config tunes a Hub. Zero values mean the defaults noted.
type Config struct {
	Workers             int           // fan-out workers; default GOMAXPROCS
	ActivityTimeout     time.Duration // advertised; the server pings a client silent this long; default 120s
	PongTimeout         time.Duration // close 4201 when a ping stays unanswered this long; default 30s
	OutboundBufferBytes int           // queued bytes per connection before 4100; default 1 MiB
	MaxConnections      int           // node limit, already capped by the open-file limit; 0 = no limit
	MaxMessageBytes     int           // largest client message (close 1009 over it); default 64 KiB
	PublishTimeout      time.Duration // how long a publisher waits for a full worker queue before 503; default 1s
	HandshakeTimeout    time.Duration // to write the handshake response; default 5s
	CloseGrace          time.Duration // how long a close frame may take to leave; default 2s
	SweepInterval       time.Duration // how often workers check timeouts; default 1s
	InboxSize           int           // commands queued per worker; default 8192
	// SendBufferBytes is each connection's kernel send buffer (SO_SNDBUF): it bounds the
	// kernel memory a client that stops reading pins and how much a slow consumer must read
	// before its 4100. Default 64 KiB; negative: the kernel's autotuning (several MiB).
	SendBufferBytes int
	// FrameTimeout bounds the time from a client frame's (or fragmented message's) first
	// byte to its last; over it the connection is closed with 1008. Default 20s; negative:
	// no bound.
	FrameTimeout time.Duration

	// The last events of cache channels, kept for CacheTTL, are bounded in bytes (frames,
	// names and bookkeeping) per app and per node; past a bound the least recently written
	// are evicted and their channels answer pusher:cache_miss again.
	CacheMaxBytes       int           // node; default 64 MiB
	CacheMaxBytesPerApp int           // each app; default a quarter of CacheMaxBytes
	CacheTTL            time.Duration // default 30 min, as Pusher

	// In a cluster (see UseBroker): each node announces its share of the cluster's state
	// (subscription counts, presence members) with a heartbeat every ClusterHeartbeat
	// (default 2s); a node not heard from for ClusterNodeTimeout (default 10s) while this one
	// has had its bus is dead, and its share is dropped (member_removed for its members).
	ClusterHeartbeat   time.Duration
	ClusterNodeTimeout time.Duration
	// SubscriptionCountInterval is how often subscription counts go out (see subcount.go);
	// default 1s.
	SubscriptionCountInterval time.Duration

	// Admission control; nil means no limit of that kind.
	Memory *guard.Memory // refuse new connections (4100) while it refuses
	IPRate *guard.IPRate // refuse an address's connections over its rate (4100)
	// PublishLatency, when set, returns the observer of an app's publish → last-frame-queued
	// latency in seconds; it is called once per app by New.
	PublishLatency func(appID string) Observer
	// OriginLatency, when set, returns the observer of an app's origin → last-frame-queued
	// latency in seconds, observed for each event with an origin (herald.Event.Origin: the
	// ingested records) on every node that delivers it to local subscribers; it is called
	// once per app by New and may return nil for an app not to measure.
	OriginLatency func(appID string) Observer
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	def(&c.ActivityTimeout, 120*time.Second)
	def(&c.PongTimeout, 30*time.Second)
	def(&c.PublishTimeout, time.Second)
	def(&c.HandshakeTimeout, 5*time.Second)
	def(&c.CloseGrace, 2*time.Second)
	def(&c.SweepInterval, time.Second)
	if c.OutboundBufferBytes <= 0 {
		c.OutboundBufferBytes = 1 << 20
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 10
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = math.MaxInt32
	}
	if c.InboxSize <= 0 {
		c.InboxSize = 8192
	}
	if c.SendBufferBytes == 0 {
		c.SendBufferBytes = 64 << 10
	}
	if c.CacheMaxBytes <= 0 {
		c.CacheMaxBytes = 64 << 20
	}
	if c.CacheMaxBytesPerApp <= 0 {
		c.CacheMaxBytesPerApp = c.CacheMaxBytes / 4
	}
	def(&c.CacheTTL, 30*time.Minute)
	def(&c.ClusterHeartbeat, 2*time.Second)
	def(&c.ClusterNodeTimeout, 10*time.Second)
	return c
}

// Hub is one node's Pusher server: the session side (the HTTP upgrade, each connection's
// protocol messages, subscriptions, presence, users, the REST queries) on top of the fan-out
// core it embeds (see core), which owns the connections' writes, the channels' subscribers,
// publishing and the cluster bus. It is safe for concurrent use.
type Hub struct {
	*core
	byKey   map[string]*appState
	engine  *ws.Engine
	nextNum atomic.Uint64

	refusals    [refusalCount]atomic.Int64
	refusalWarn [refusalCount]lograte.Limit // refusal warnings, by reason

	pongFrame []byte // the answer to pusher:ping

	stopped sync.Once
}

// New builds a hub for apps and starts its workers, pollers and clock. A zero field of an
// app's Limits means its default (herald.DefaultLimits).
func New(cfg Config, apps []*herald.App, log *slog.Logger) (*Hub, error) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{core: newCore(cfg, log), byKey: map[string]*appState{}, pongFrame: ws.TextFrame(pusher.PongPayload)}
	for _, a := range apps {
		origins, err := guard.ParseOrigins(a.AllowedOrigins)
		if err != nil {
			return nil, fmt.Errorf("app %s: allowed origins: %w", a.ID, err)
		}
		// A zero limit means its default (herald.Limits): the hub reads limits from its own
		// copy, so an app built without them (or from a store that left them raw) works.
		a := withDefaultLimits(a)
		lim := a.Limits
		st := &appState{app: a, channels: newRegistry(cfg.Workers, &h.channels), cache: newCache(h.cache), users: map[string][]*Conn{},
			counters: make([]counters, cfg.Workers), origins: origins,
			events: guard.Rate{PerSecond: float64(lim.MaxClientEventsPerSecond), Burst: float64(lim.MaxClientEventsPerSecond)}}
		if cfg.PublishLatency != nil {
			st.lat.publish = cfg.PublishLatency(a.ID)
		}
		if cfg.OriginLatency != nil {
			st.lat.origin = cfg.OriginLatency(a.ID)
		}
		h.apps[a.ID] = st
		h.byKey[a.Key] = st
	}
	eng, err := ws.NewEngine(ws.Config{Pollers: cfg.Workers, MaxMessageBytes: cfg.MaxMessageBytes,
		SendBufferBytes: max(cfg.SendBufferBytes, 0), FrameTimeout: cfg.FrameTimeout}, h)
	if err != nil {
		return nil, err
	}
	h.engine = eng
	h.terminate = func(app, user string) { h.closeUser(app, user) }
	h.core.start()
	return h, nil
}

// withDefaultLimits returns a with every zero limit replaced by its default: a itself when
// nothing changes, else a copy (apps are never mutated).
func withDefaultLimits(a *herald.App) *herald.App {
	if l := a.Limits.WithDefaults(); l != a.Limits {
		c := *a
		c.Limits = l
		return &c
	}
	return a
}

// closeFrames is a pusher:error followed by a close frame with the same code: what pusher-js
// reads to decide whether and how to reconnect.
func closeFrames(code int, msg string) []byte {
	f := ws.TextFrame(pusher.AppendError(nil, code, msg))
	return append(f, ws.CloseFrame(code, msg)...)
}

// Stats is a snapshot of the node's counters.
type Stats struct {
	Connections    int64
	MaxConnections int
	Channels       int64
	SlowConsumers  int64
	PongTimeouts   int64
	Refused        int64 // every refusal, whatever the reason (see Refusals)
	Draining       bool
	Refusing       bool // the memory guard refuses new connections
}

// Stats returns the node's counters.
func (h *Hub) Stats() Stats {
	var refused int64
	for i := range h.refusals {
		refused += h.refusals[i].Load()
	}
	return Stats{
		Connections:    h.conns.Load(),
		MaxConnections: h.cfg.MaxConnections,
		Channels:       h.channels.Load(),
		SlowConsumers:  h.slowConsumerCount(),
		PongTimeouts:   h.pongTimeouts.Load(),
		Refused:        refused,
		Draining:       h.draining.Load(),
		Refusing:       h.cfg.Memory.Refusing(),
	}
}

// ActivityTimeout is the value advertised to clients.
func (h *Hub) ActivityTimeout() time.Duration { return h.cfg.ActivityTimeout }

// Shutdown closes every connection with 4200 (clients reconnect elsewhere), waits for them to
// go within ctx, then stops the hub's goroutines. It is idempotent.
func (h *Hub) Shutdown(ctx context.Context) error {
	var err error
	h.stopped.Do(func() {
		h.draining.Store(true)
		if h.conns.Load() == 0 {
			h.drainOne.Do(func() { close(h.drained) })
		}
		for _, w := range h.workers {
			w.inbox <- cmd{op: opCloseAll, frame: h.closeShutdown}
		}
		select {
		case <-h.drained:
		case <-ctx.Done():
			err = errors.New("hub: connections still open at the shutdown deadline")
		}
		h.core.stopAll()
		h.engine.Close()
	})
	return err
}
