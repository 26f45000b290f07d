package session

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/guard"
	"github.com/herald-rt/herald/internal/lograte"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// Config tunes a Server. Zero values mean the defaults noted.
type Config struct {
	Workers             int           // fan-out workers (and WebSocket pollers); default GOMAXPROCS
	WriteDelay          time.Duration // see fanout.Config; 0: its default, negative: never hold
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
	// SubscriptionCountInterval is how often subscription counts go out (see subcount.go);
	// default 1s.
	SubscriptionCountInterval time.Duration

	// ReplayBudget bounds the history replayed to recovering clients (replaybudget.go); its
	// zero value bounds nothing.
	ReplayBudget ReplayBudget

	// Admission control; nil means no limit of that kind.
	Memory *guard.Memory // refuse new connections (4100) while it refuses
	IPRate *guard.IPRate // refuse an address's connections over its rate (4100)
	// PublishLatency, when set, returns the observer of an app's publish → last-frame-queued
	// latency in seconds; it is called once per app by New.
	PublishLatency func(appID string) fanout.Observer
	// OriginLatency, when set, returns the observer of an app's origin → last-frame-queued
	// latency in seconds, observed for each event with an origin (herald.Event.Origin: the
	// ingested records) on every node that delivers it to local subscribers; it is called
	// once per app by New and may return nil for an app not to measure.
	OriginLatency func(appID string) fanout.Observer
	// History are history rules for apps by id (an app store's, from the configuration):
	// each app's channels follow its own rules (herald.App.History) and then these, as
	// herald.App.HistoryRules orders them.
	History []herald.AppsHistoryRule
}

func (c Config) withDefaults() Config {
	if c.ActivityTimeout <= 0 {
		c.ActivityTimeout = 120 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 10
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = math.MaxInt32
	}
	if c.SendBufferBytes == 0 {
		c.SendBufferBytes = 64 << 10
	}
	return c
}

// engineConfig is the fan-out engine's part of c, with the frames it writes of its own
// accord encoded.
func (c Config) engineConfig() fanout.Config {
	return fanout.Config{
		Workers: c.Workers, WriteDelay: c.WriteDelay, ActivityTimeout: c.ActivityTimeout, PongTimeout: c.PongTimeout,
		OutboundBufferBytes: c.OutboundBufferBytes, PublishTimeout: c.PublishTimeout, CloseGrace: c.CloseGrace,
		SweepInterval: c.SweepInterval, InboxSize: c.InboxSize,
		Ping:     ws.TextFrame(pusher.PingPayload),
		Slow:     closing(herald.CodeSlowConsumer, "slow consumer: too many bytes queued"),
		PongLost: closing(herald.CodePongTimeout, "pong reply not received in time"),
	}
}

// NewState builds a node's cluster.State on its fan-out engine: cluster.NewLocal for a
// single node, cluster.NewReplicated on a bus.
type NewState func(eng *fanout.Engine) cluster.State

// Server is one node's Pusher server: the HTTP upgrade, each connection's protocol messages,
// subscriptions, presence, users and the REST queries, on top of a fan-out engine it owns and
// the cluster.State it is given. It is safe for concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store herald.AppStore
	stale herald.AppStoreStale // the store's, when it can lose its source; else nil
	// apps holds each app's state by id (*appState): one for every app of the store at New,
	// and one more for each app the store adds (AppsChanged, or the first connection or
	// call that finds the app in the store first). A state outlives its app's deletion (its
	// connections closed), and serves it again if the app comes back.
	apps   sync.Map
	appsMu sync.Mutex // serialises the creation of states
	eng    *fanout.Engine
	st     cluster.State
	ws     *ws.Engine

	subCounts *subCounts // channels due a subscription count event
	subOnce   sync.Once  // starts the rounds once an app sends them

	refusals    [refusalCount]atomic.Int64
	refusalWarn [refusalCount]lograte.Limit // refusal warnings, by reason

	pongFrame []byte       // the answer to pusher:ping
	shutdown  fanout.Close // 4200 to every client at shutdown
	lost      fanout.Close // 4200 to the subscribers of a channel whose events are gone
	missed    fanout.Close // 4100 to the subscribers of a channel without history this node dropped events of

	recoveries recoveries     // outcomes of recovery requests (recovery.go)
	budgets    *replayBudgets // what replays may cost (replaybudget.go)

	stop    chan struct{}
	wg      sync.WaitGroup
	stopped sync.Once
}

// appState is the server's live state of one app.
type appState struct {
	id      string
	cfg     atomic.Pointer[appConfig] // replaced whole when the app changes (AppsChanged)
	st      *cluster.App              // its channels, presence and cache
	g       *fanout.Group             // its connections
	replay  *guard.Shared             // its replay budget on this node (replaybudget.go)
	usersMu sync.Mutex
	users   map[string][]*conn // signed-in user id -> connections
	obs     observers          // activity observers (activity.go)

	// Watchlists (watchlist.go), under usersMu.
	watchers    map[string][]*conn // user id -> the connections watching it
	remoteUsers map[string]int     // user id -> the other nodes where it is signed in
}

// appConfig is one app's settings as the server applies them: the app (its zero limits
// filled with their defaults) and what the server derives from it once.
type appConfig struct {
	*herald.App
	origins guard.Origins
	events  guard.Rate // each connection's client-event rate
	joins   guard.Rate // each connection's subscribe rate
}

// cur is the app's settings now: every operation reads them once, so a change applies to
// the operations that start after it.
func (a *appState) cur() *appConfig { return a.cfg.Load() }

// configOf derives an app's settings; an app's origins are checked by whoever built it
// (the configuration, the app store), so an error here is one they let through.
func configOf(a *herald.App) (*appConfig, error) {
	// A zero limit means its default (herald.Limits): the server reads limits from its own
	// copy, so an app built without them (or from a store that left them raw) works.
	a = withDefaultLimits(a)
	origins, err := guard.ParseOrigins(a.AllowedOrigins)
	n, j := float64(a.Limits.MaxClientEventsPerSecond), float64(a.Limits.MaxSubscriptionsPerSecond)
	return &appConfig{App: a, origins: origins, events: guard.Rate{PerSecond: n, Burst: n},
		joins: guard.Rate{PerSecond: j, Burst: max(j, float64(a.Limits.MaxChannelsPerConn))}}, err
}

// New builds a server for the apps of store, on a fan-out engine of its own and the state
// newState builds on it, and starts them. A zero field of an app's Limits means its default
// (herald.DefaultLimits). When the store's apps change, tell the server (AppsChanged); an
// app it finds in the store first serves all the same. Shutdown stops everything New started.
func New(cfg Config, store herald.AppStore, newState NewState, log *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, store: store, pongFrame: ws.TextFrame(pusher.PongPayload), stop: make(chan struct{}), budgets: newReplayBudgets(cfg.ReplayBudget),
		shutdown:  closing(herald.CodeReconnect, "server shutting down, reconnect"),
		lost:      closing(herald.CodeReconnect, "events of a subscribed channel were lost on this node, reconnect to recover them"),
		missed:    closing(herald.CodeBusy, "this node could not keep up and dropped events of a subscribed channel, reconnect"),
		subCounts: &subCounts{dirty: map[chanKey]struct{}{}}}
	s.stale, _ = store.(herald.AppStoreStale)
	apps := store.Apps()
	for _, a := range apps {
		if _, err := configOf(a); err != nil {
			return nil, fmt.Errorf("app %s: allowed origins: %w", a.ID, err)
		}
	}
	s.eng = fanout.New(cfg.engineConfig(), log)
	s.st = newState(s.eng)
	for _, a := range apps {
		s.ensure(a)
	}
	wse, err := ws.NewEngine(ws.Config{Pollers: s.eng.Workers(), MaxMessageBytes: cfg.MaxMessageBytes,
		SendBufferBytes: max(cfg.SendBufferBytes, 0), FrameTimeout: cfg.FrameTimeout}, reader{s})
	if err != nil {
		s.eng.Stop()
		return nil, err
	}
	s.ws = wse
	s.st.Start(listener{s})
	return s, nil
}

// state returns app id's state, nil if the server has none.
func (s *Server) state(id string) *appState {
	if v, ok := s.apps.Load(id); ok {
		return v.(*appState)
	}
	return nil
}

// app returns app id's state, making it when the store has the app and the server has no
// state yet; nil for an app the store does not have.
func (s *Server) app(id string) *appState {
	if a := s.state(id); a != nil {
		return a
	}
	if app, ok := s.store.AppByID(id); ok {
		return s.ensure(app)
	}
	return nil
}

// ensure returns app's state, making it (with app's settings) when there is none.
func (s *Server) ensure(app *herald.App) *appState {
	if a := s.state(app.ID); a != nil {
		return a
	}
	s.appsMu.Lock()
	defer s.appsMu.Unlock()
	if a := s.state(app.ID); a != nil {
		return a
	}
	var lat fanout.Latencies
	if s.cfg.PublishLatency != nil {
		lat.Publish = s.cfg.PublishLatency(app.ID)
	}
	if s.cfg.OriginLatency != nil {
		lat.Origin = s.cfg.OriginLatency(app.ID)
	}
	g := s.eng.NewGroup(app.ID, lat)
	a := &appState{id: app.ID, g: g, st: s.st.AddApp(app.ID, g, app.HistoryRules(s.cfg.History)), users: map[string][]*conn{},
		replay: guard.NewShared(s.cfg.ReplayBudget.App)}
	s.configure(a, app)
	s.apps.Store(app.ID, a)
	return a
}

// configure gives a the settings of app. New history rules apply to the channels that
// open from now on (cluster.App.SetHistoryRules).
func (s *Server) configure(a *appState, app *herald.App) {
	c, err := configOf(app)
	if err != nil {
		s.log.Warn("app's allowed origins are invalid: every origin is refused", "app_id", app.ID, "err", err)
		c.origins = guard.NoOrigins()
	}
	a.cfg.Store(c)
	a.st.SetHistoryRules(app.HistoryRules(s.cfg.History))
	if app.EnableSubscriptionCountEvent {
		s.subOnce.Do(s.startSubCounts)
	}
}

// AppsChanged applies changes of the store's apps (see herald.AppChange), in order: an app
// added gets its state at once; an app changed has its new settings (credentials, switches,
// limits, origins) for every operation that starts from now on, and its new history rules
// for the channels that open from now on; the connections of an app
// disabled are closed with 4003, and those of an app deleted with 4001.
func (s *Server) AppsChanged(changes []herald.AppChange) {
	for _, c := range changes {
		if c.New == nil {
			if a := s.state(c.Old.ID); a != nil {
				s.eng.CloseGroup(a.g, herald.CodeAppNotFound.PusherCode(), closeFrames(herald.CodeAppNotFound.PusherCode(), "app deleted"))
			}
			continue
		}
		a := s.ensure(c.New)
		s.configure(a, c.New)
		if c.New.Disabled {
			s.eng.CloseGroup(a.g, herald.CodeAppDisabled.PusherCode(), closeFrames(herald.CodeAppDisabled.PusherCode(), "app disabled"))
		}
	}
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

// closing is how the server closes a connection with code: a pusher:error followed by a
// close frame with the same code, what pusher-js reads to decide whether and how to
// reconnect.
func closing(code herald.Code, msg string) fanout.Close {
	return fanout.Close{Code: code.PusherCode(), Frame: closeFrames(code.PusherCode(), msg)}
}

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
	PongsUnread    int64 // pong timeouts forgiven: the client's bytes were unread in the kernel
	Refused        int64 // every refusal, whatever the reason (see Refusals)
	Draining       bool
	Refusing       bool // the memory guard refuses new connections
}

// Stats returns the node's counters.
func (s *Server) Stats() Stats {
	var refused, channels int64
	for i := range s.refusals {
		refused += s.refusals[i].Load()
	}
	s.apps.Range(func(_, v any) bool {
		channels += v.(*appState).st.Figures().Channels
		return true
	})
	return Stats{
		Connections:    s.eng.Conns(),
		MaxConnections: s.cfg.MaxConnections,
		Channels:       channels,
		SlowConsumers:  s.eng.SlowConsumers(),
		PongTimeouts:   s.eng.PongTimeouts(),
		PongsUnread:    s.eng.PongsUnread(),
		Refused:        refused,
		Draining:       s.eng.Draining(),
		Refusing:       s.cfg.Memory.Refusing(),
	}
}

// Connections returns how many WebSocket connections the node holds: Stats' Connections,
// without the rest of the snapshot (one atomic load).
func (s *Server) Connections() int64 { return s.eng.Conns() }

// Workers returns the number of fan-out workers.
func (s *Server) Workers() int { return s.eng.Workers() }

// QueueDepths returns how many commands wait in each fan-out worker's inbox.
func (s *Server) QueueDepths() []int { return s.eng.QueueDepths() }

// WriteDelays returns each fan-out worker's write delay now (fanout.Engine.WriteDelays).
func (s *Server) WriteDelays() []time.Duration { return s.eng.WriteDelays() }

// now is the engine's clock, in ms.
func (s *Server) now() int64 { return s.eng.Now() }

// monoNow is the monotonic clock in nanoseconds, for rates.
func (s *Server) monoNow() int64 { return fanout.Mono() }

// Shutdown closes every connection with 4200 (clients reconnect elsewhere), waits for them to
// go within ctx, then stops the state (which says goodbye to the other nodes), the engine
// and the server's goroutines. It is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.stopped.Do(func() {
		if err = s.eng.Drain(ctx, s.shutdown); err != nil {
			err = fmt.Errorf("shutdown: %w", err)
		}
		close(s.stop)
		s.wg.Wait()
		s.st.Stop(ctx)
		s.eng.Stop()
		s.ws.Close()
	})
	return err
}
