package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/herald-rt/herald"
)

// Config is everything `herald serve` needs, filled once by Load from defaults, the
// config file, the environment and flags, in that order, and validated once. The reference
// for every field is docs/configuration.md.
type Config struct {
	Host string // interface to listen on
	Port int    // TCP port, 1..65535
	// MaxConnections bounds the WebSocket connections of the whole node; 0 means as many as
	// the open-file limit allows.
	MaxConnections int
	// ShutdownTimeout is how long SIGTERM waits for connections to close.
	ShutdownTimeout Duration
	// ActivityTimeout is advertised to clients; the server pings a client silent this long.
	ActivityTimeout Duration
	// PongTimeout is how long the server waits for a reply to its ping before closing 4201.
	PongTimeout Duration
	// MaxMessageBytes is the largest WebSocket message a client may send (close 1009 over it).
	MaxMessageBytes int
	// OutboundBufferBytes bounds the bytes queued for one connection; over it the connection
	// is closed as a slow consumer (4100).
	OutboundBufferBytes int
	// SocketSendBufferBytes is each connection's kernel send buffer (SO_SNDBUF); 0 = the
	// kernel's autotuning.
	SocketSendBufferBytes int
	// FrameTimeout bounds the time from a client frame's (or fragmented message's) first
	// byte to its last (close 1008 over it).
	FrameTimeout Duration
	// Workers is the number of fan-out workers; 0 means GOMAXPROCS.
	Workers int
	// WriteDelay is the longest a busy node holds the frames of a connection it wrote very
	// recently, so that a burst leaves in one write; 0: never.
	WriteDelay Duration
	// RESTTimestampWindow is how far a REST request's auth_timestamp may be from now.
	RESTTimestampWindow Duration
	// HandshakeTimeout bounds reading a connection's HTTP upgrade request and writing the
	// response: a client slower than this (slow-loris) is dropped.
	HandshakeTimeout Duration
	// RESTRequestTimeout bounds reading a whole HTTP request on the public port, headers and
	// body, and writing its response; at least HandshakeTimeout.
	RESTRequestTimeout Duration
	// RESTIdleTimeout closes a keep-alive HTTP connection idle this long.
	RESTIdleTimeout Duration
	// MaxHTTPConnections bounds the public port's connections in their HTTP phase (REST,
	// health, upgrades not yet handed to the WebSocket engine); their descriptors are kept
	// out of the WebSocket capacity.
	MaxHTTPConnections int
	// RESTReplayProtection refuses a signed REST request whose signature was already used
	// inside the timestamp window.
	RESTReplayProtection bool
	// RESTReplayMaxPerApp bounds the signatures replay protection remembers per app on this
	// node (about 70 bytes each); past it the app's signed requests get 503, other apps'
	// do not.
	RESTReplayMaxPerApp int
	// ConnectionRatePerIP is how many new connections per second one client address may
	// open (a token bucket with ConnectionBurstPerIP, 0 meaning the rate); over it the
	// handshake is refused with 4100. 0 = no limit. On by default (defaultConnectionRatePerIP):
	// each new connection brings its own subscribe burst (max_channels_per_conn), so an
	// address that may open connections without bound may subscribe without bound.
	ConnectionRatePerIP  int
	ConnectionBurstPerIP int
	// ConnectionIPv6Prefix is the prefix length IPv6 clients are grouped by for
	// ConnectionRatePerIP (64: every address of a /64 shares one bucket; 128: none do).
	ConnectionIPv6Prefix int
	Memory               MemoryConfig
	Cache                CacheConfig
	History              HistoryConfig
	Publish              PublishConfig // publish.go
	Metrics              MetricsConfig
	Pprof                PprofConfig
	Log                  LogConfig
	Cluster              ClusterConfig
	Console              ConsoleConfig
	Shutdown             ShutdownConfig
	Webhooks             WebhooksConfig // webhooks.go
	TLS                  TLSConfig      // tls.go
	// Ingest are the Kafka and Redis sources the node consumes into channels (ingest.go).
	Ingest []IngestConfig
	// Apps are the tenants. Without any app in the file, environment or flags, Apps holds the
	// built-in development app (see UsedDefaultApp); with AppStore on, none: the
	// database's apps are the tenants.
	Apps []AppConfig
	// AppStore keeps the apps in a database table instead (appstore.go).
	AppStore AppStoreConfig
}

// MemoryConfig is the memory guard: above RefuseAbovePercent of LimitBytes the node refuses
// new connections (4100) and /ready answers 503; below AcceptBelowPercent it accepts again.
type MemoryConfig struct {
	LimitBytes         int // 0 = the cgroup limit, else the machine's memory
	RefuseAbovePercent int // 0 = no guard
	AcceptBelowPercent int
}

// CacheConfig bounds the last events that cache channels keep: frames, names and
// bookkeeping, counted in bytes. Past a bound the least recently written are evicted.
type CacheConfig struct {
	MaxBytes       int      // every app's on this node together
	MaxBytesPerApp int      // each app's
	TTL            Duration // how long an event stays cached
}

// MetricsConfig is the Prometheus endpoint, served on its own listener.
type MetricsConfig struct {
	Enabled bool
	Host    string
	Port    int // 0 = any free port (logged)
	Prefix  string
}

// PprofConfig is the profiling listener, off unless Addr is set.
type PprofConfig struct {
	Addr          string // host:port; empty = off
	MutexFraction int    // runtime.SetMutexProfileFraction while profiling is on
	BlockRate     int    // runtime.SetBlockProfileRate (nanoseconds) while profiling is on
}

// LogConfig chooses the log/slog handler main builds.
type LogConfig struct {
	Level  string // debug, info, warn or error
	Format string // text or json
}

// ClusterConfig joins the node to a cluster bus; with URL empty the node is alone.
type ClusterConfig struct {
	// URL is the bus: nats://host:port (several servers comma-separated) for NATS,
	// redis://[user:password@]host:port[/db] or rediss:// for Redis. Empty = single node.
	URL string
	// NodeID names this node on the bus, unique in the cluster; empty = generated at start.
	NodeID string
	// Prefix starts every bus subject (NATS) or channel (Redis), so that several clusters
	// can share one bus.
	Prefix string
	// Heartbeat is how often the node announces its share of the cluster's state
	// (subscription counts, presence members).
	Heartbeat Duration
	// NodeTimeout is how long a node may go unheard, while this node has had its bus that
	// long, before it is declared dead and its share dropped; at least 3 × Heartbeat.
	NodeTimeout Duration

	// Secret seals every bus message (broker.Auth): nodes refuse messages not sealed with
	// it, and messages received before. Every node of a cluster shares it; a cluster
	// without one refuses to start unless Insecure is set. SecretFile names a file holding
	// it instead (validation reads it into Secret). AcceptSecret (or AcceptSecretFile) is a
	// second secret whose messages are accepted, never used to seal: for a rotation.
	Secret, SecretFile             string
	AcceptSecret, AcceptSecretFile string
	// Insecure lets a cluster start without Secret: its bus messages travel unsealed and
	// whoever can publish on the bus is believed. Warned of at start and in the
	// cluster_unsealed metric.
	Insecure bool
	// Encrypt encrypts every message's payload with a key derived from Secret, and the
	// history channels' events kept on the bus's server.
	Encrypt bool
	// ClockSkew is how far the nodes' clocks may disagree: a sealed message sent longer
	// ago than that is refused.
	ClockSkew Duration
	// Bundles sends the events of one publish call for one channel as one bus message
	// (cluster: bundles) while every node of the cluster reads them; default true.
	Bundles bool

	// TLS to the bus server: a CA to verify it (empty: the system's), and this node's
	// certificate and key (both or neither).
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// NATSCredsFile (a .creds file: a user JWT and its nkey seed) or NATSNKeyFile (an nkey
	// seed) authenticate the node to a NATS server.
	NATSCredsFile, NATSNKeyFile string
	// NATSPingInterval and NATSPingsOutstanding are the NATS connection's keepalive: a PING
	// every NATSPingInterval, the connection given up as stale (and reconnected) when
	// NATSPingsOutstanding of them are unanswered.
	NATSPingInterval     Duration
	NATSPingsOutstanding int
}

// AppConfig is one app as configured; HeraldApps turns it into a herald.App.
type AppConfig struct {
	ID, Key, Secret          string
	EnableClientMessages     bool
	EnableUserAuthentication bool
	// EnableSubscriptionCountEvent sends subscribers their channel's subscription count.
	EnableSubscriptionCountEvent bool
	// AllowedOrigins lists the browser origins that may connect; empty allows all.
	AllowedOrigins []string
	// Limits holds the app's limits; a zero field means the default in herald.DefaultLimits.
	Limits   herald.Limits
	Webhooks []AppWebhook // webhooks.go
	History  []AppHistory // history.go
}

// Duration is a time.Duration that config files, environment variables and flags write as a
// Go duration string ("10s", "1m30s") or as an integer number of seconds.
type Duration struct{ time.Duration }

// devApp is the built-in development app used when nothing configures an app. Its secret is
// public, so main warns when it is in use.
var devApp = AppConfig{
	ID:                       "app-id",
	Key:                      "app-key",
	Secret:                   "app-secret",
	EnableClientMessages:     true,
	EnableUserAuthentication: true,
}

// The default per-address connection rate: what one address costs is bounded (about 20
// handshakes a second, and 20 × max_channels_per_conn subscriptions), while the clients of an
// office behind one NAT address reconnecting at once after a restart (100 at once, then 20 a
// second: 500 within 20 s, pusher-js retrying a refusal by itself) still get in. Behind a proxy
// that hides client addresses every client shares one: set 0 there.
const (
	defaultConnectionRatePerIP  = 20
	defaultConnectionBurstPerIP = 100
)

// defaultConfig is the configuration before any file, environment variable or flag.
func defaultConfig() Config {
	return Config{
		Host:                 "127.0.0.1",
		Port:                 6001,
		ShutdownTimeout:      Duration{10 * time.Second},
		ActivityTimeout:      Duration{120 * time.Second},
		PongTimeout:          Duration{30 * time.Second},
		MaxMessageBytes:      64 << 10,
		OutboundBufferBytes:  1 << 20,
		WriteDelay:           Duration{2 * time.Millisecond},
		RESTTimestampWindow:  Duration{600 * time.Second},
		HandshakeTimeout:     Duration{5 * time.Second},
		RESTRequestTimeout:   Duration{10 * time.Second},
		RESTIdleTimeout:      Duration{30 * time.Second},
		MaxHTTPConnections:   256,
		RESTReplayMaxPerApp:  1 << 20,
		ConnectionIPv6Prefix: 64,
		ConnectionRatePerIP:  defaultConnectionRatePerIP,
		ConnectionBurstPerIP: defaultConnectionBurstPerIP,
		Memory:               MemoryConfig{RefuseAbovePercent: 90, AcceptBelowPercent: 80},
		History:              defaultHistory(),
		Publish:              defaultPublish(),
		Cache:                CacheConfig{MaxBytes: 64 << 20, MaxBytesPerApp: 16 << 20, TTL: Duration{30 * time.Minute}},
		Metrics:              MetricsConfig{Enabled: true, Host: "127.0.0.1", Port: 9601, Prefix: "herald_"},
		Pprof:                PprofConfig{MutexFraction: 10, BlockRate: 100_000},
		Log:                  LogConfig{Level: "info", Format: "text"},
		Cluster: ClusterConfig{Prefix: "herald", Heartbeat: Duration{2 * time.Second}, NodeTimeout: Duration{10 * time.Second},
			ClockSkew: Duration{DefaultClockSkew}, Bundles: true,
			NATSPingInterval: Duration{NATSPingInterval}, NATSPingsOutstanding: NATSPingsOutstanding},
		Apps:     []AppConfig{devApp},
		Shutdown: defaultShutdown(),
		Console:  ConsoleConfig{SessionLifetime: Duration{12 * time.Hour}},
		Webhooks: defaultWebhooks(),
		AppStore: defaultAppStore(),

		SocketSendBufferBytes: 64 << 10,
		FrameTimeout:          Duration{20 * time.Second},
	}
}

// IsDevApp reports whether a uses the built-in development credentials (key "app-key",
// secret "app-secret"), whose secret is public.
func IsDevApp(a AppConfig) bool { return a.Key == devApp.Key && a.Secret == devApp.Secret }

// UsedDefaultApp reports whether any app uses the built-in development credentials (key
// "app-key", secret "app-secret"), whether by falling back to them or by copying them into a
// file. Their secret is public, so main warns when this is true.
func (c Config) UsedDefaultApp() bool {
	for _, a := range c.Apps {
		if IsDevApp(a) {
			return true
		}
	}
	return false
}

// HeraldApps converts the configured apps to herald.Apps. Zero limits stay zero: they mean
// "default" and herald.NewStaticApps fills them.
func (c Config) HeraldApps() []herald.App {
	out := make([]herald.App, len(c.Apps))
	for i, a := range c.Apps {
		out[i] = herald.App{
			ID:                       a.ID,
			Key:                      a.Key,
			Secret:                   a.Secret,
			EnableClientMessages:     a.EnableClientMessages,
			EnableUserAuthentication: a.EnableUserAuthentication,
			AllowedOrigins:           a.AllowedOrigins,
			Limits:                   a.Limits,
			History:                  a.historyRules(),
			Webhooks:                 a.heraldWebhooks(),
		}
		out[i].EnableSubscriptionCountEvent = a.EnableSubscriptionCountEvent
	}
	return out
}

// setting is one scalar key that the file, the environment and flags can all set. Its
// environment variable and flag names derive from the key: "log.level" is HERALD_LOG_LEVEL
// and --log-level.
type setting struct {
	key   string            // file key, and the field's name in errors
	usage string            // one line for -h
	ref   func(*Config) any // *string, *int, *bool or *Duration
}

var settings = slices.Concat([]setting{
	{"host", "interface to listen on", func(c *Config) any { return &c.Host }},
	{"port", "TCP port to listen on", func(c *Config) any { return &c.Port }},
	{"max_connections", "most connections on this node; 0 = as many as the open-file limit allows", func(c *Config) any { return &c.MaxConnections }},
	{"shutdown_timeout", "how long SIGTERM waits for connections to close", func(c *Config) any { return &c.ShutdownTimeout }},
	{"shutdown.drain_delay", "on SIGTERM, keep serving this long with /ready at 503 before closing connections with 4200; 0 = at once", func(c *Config) any { return &c.Shutdown.DrainDelay }},
	{"activity_timeout", "silence after which the server pings a client; advertised to clients", func(c *Config) any { return &c.ActivityTimeout }},
	{"pong_timeout", "wait for a reply to the server's ping before closing 4201", func(c *Config) any { return &c.PongTimeout }},
	{"max_message_bytes", "largest WebSocket message a client may send (close 1009 over it)", func(c *Config) any { return &c.MaxMessageBytes }},
	{"outbound_buffer_bytes", "bytes queued per connection before closing it as a slow consumer (4100)", func(c *Config) any { return &c.OutboundBufferBytes }},
	{"socket_send_buffer_bytes", "kernel send buffer per connection (SO_SNDBUF); 0 = the kernel's autotuning", func(c *Config) any { return &c.SocketSendBufferBytes }},
	{"frame_timeout", "longest a client may take from a frame's first byte to its last (close 1008 over it)", func(c *Config) any { return &c.FrameTimeout }},
	{"workers", "fan-out workers; 0 = GOMAXPROCS", func(c *Config) any { return &c.Workers }},
	{"write_delay", "longest a busy node holds frames for a connection it wrote very recently, so a burst leaves in one write; 0 = never", func(c *Config) any { return &c.WriteDelay }},
	{"rest_timestamp_window", "how far a REST request's auth_timestamp may be from now", func(c *Config) any { return &c.RESTTimestampWindow }},
	{"handshake_timeout", "longest a client may take to send its upgrade request (slow-loris guard)", func(c *Config) any { return &c.HandshakeTimeout }},
	{"rest_request_timeout", "longest an HTTP request may take to arrive, headers and body, and its response to leave", func(c *Config) any { return &c.RESTRequestTimeout }},
	{"rest_idle_timeout", "keep-alive HTTP connections idle this long are closed", func(c *Config) any { return &c.RESTIdleTimeout }},
	{"max_http_connections", "most connections in their HTTP phase (REST, health, upgrades) at once", func(c *Config) any { return &c.MaxHTTPConnections }},
	{"rest_replay_protection", "refuse a signed REST request whose signature was already used in the timestamp window", func(c *Config) any { return &c.RESTReplayProtection }},
	{"rest_replay_max_per_app", "signatures replay protection remembers per app on this node; past it that app's signed requests get 503", func(c *Config) any { return &c.RESTReplayMaxPerApp }},
	{"connection_rate_per_ip", "new connections per second one address may open (4100 over it); 0 = no limit (behind a proxy that hides client addresses)", func(c *Config) any { return &c.ConnectionRatePerIP }},
	{"connection_ipv6_prefix", "IPv6 clients count for connection_rate_per_ip by their network of this many bits (64: a /64 is one client)", func(c *Config) any { return &c.ConnectionIPv6Prefix }},
	{"connection_burst_per_ip", "burst of new connections one address may open at once; 0 = the rate", func(c *Config) any { return &c.ConnectionBurstPerIP }},
	{"memory.limit_bytes", "memory the guard's percentages apply to; 0 = cgroup limit, else machine memory", func(c *Config) any { return &c.Memory.LimitBytes }},
	{"memory.refuse_above_percent", "refuse new connections (4100) above this share of the limit; 0 = no guard", func(c *Config) any { return &c.Memory.RefuseAbovePercent }},
	{"memory.accept_below_percent", "accept connections again below this share of the limit", func(c *Config) any { return &c.Memory.AcceptBelowPercent }},
	{"cache.max_bytes", "bytes the last events of every app's cache channels may hold on this node", func(c *Config) any { return &c.Cache.MaxBytes }},
	{"cache.max_bytes_per_app", "bytes the last events of one app's cache channels may hold", func(c *Config) any { return &c.Cache.MaxBytesPerApp }},
	{"history.max_bytes_per_app", "bytes the events one app's history channels keep may hold on this node", func(c *Config) any { return &c.History.MaxBytesPerApp }},
	{"history.replicas", "servers of a NATS cluster that keep each history stream (JetStream replicas); 0 = 1", func(c *Config) any { return &c.History.Replicas }},
	{"history.replay_bytes_per_second", "history this node replays to recovering clients, bytes per second (past it: recovered:false, rate_limited); 0 = no bound", func(c *Config) any { return &c.History.ReplayBytesPerSecond }},
	{"history.replay_bytes_per_second_per_app", "history this node replays to one app's recovering clients, bytes per second; 0 = no bound", func(c *Config) any { return &c.History.ReplayBytesPerSecondPerApp }},
	{"history.replay_bytes_per_second_per_address", "history replayed to the recovering clients of one address, bytes per second; 0 = no bound", func(c *Config) any { return &c.History.ReplayBytesPerSecondPerAddress }},
	{"history.replay_bytes_per_second_per_connection", "history replayed to one connection, bytes per second; 0 = no bound", func(c *Config) any { return &c.History.ReplayBytesPerSecondPerConnection }},
	{"history.linger", "how long a cluster node keeps a history channel's copy after its last local subscriber left; 0 = not at all", func(c *Config) any { return &c.History.Linger }},
	{"publish.idempotency_window", "how long an event's idempotency key is remembered: a retry within it delivers nothing again", func(c *Config) any { return &c.Publish.IdempotencyWindow }},
	{"publish.idempotency_max_keys", "idempotency keys this node remembers at most (past it the oldest are forgotten early)", func(c *Config) any { return &c.Publish.IdempotencyMaxKeys }},
	{"cache.ttl", "how long a cache channel keeps its last event", func(c *Config) any { return &c.Cache.TTL }},
	{"metrics.enabled", "serve Prometheus metrics on their own listener", func(c *Config) any { return &c.Metrics.Enabled }},
	{"metrics.host", "interface of the metrics listener", func(c *Config) any { return &c.Metrics.Host }},
	{"metrics.port", "port of the metrics listener; 0 = any free port", func(c *Config) any { return &c.Metrics.Port }},
	{"metrics.prefix", "prefix of every herald metric name (soketi_ or sockudo_ for their dashboards)", func(c *Config) any { return &c.Metrics.Prefix }},
	{"console.token", "token of the console at /console on the metrics listener; empty = no console", func(c *Config) any { return &c.Console.Token }},
	{"console.session_lifetime", "how long a browser stays logged in to the console after its login form", func(c *Config) any { return &c.Console.SessionLifetime }},
	{"console.events_per_second", "debug log entries kept per app per second while a page watches it; 0 = 100", func(c *Config) any { return &c.Console.EventsPerSecond }},
	{"pprof.addr", "host:port of the pprof listener; empty = off", func(c *Config) any { return &c.Pprof.Addr }},
	{"pprof.mutex_fraction", "mutex profile sampling: 1 in N contention events, while pprof is on", func(c *Config) any { return &c.Pprof.MutexFraction }},
	{"pprof.block_rate", "block profile sampling: one event per N ns blocked, while pprof is on", func(c *Config) any { return &c.Pprof.BlockRate }},
	{"log.level", "debug, info, warn or error", func(c *Config) any { return &c.Log.Level }},
	{"log.format", "text or json", func(c *Config) any { return &c.Log.Format }},
	{"cluster.url", "cluster bus: nats://host:port[,nats://...] or redis[s]://[user:password@]host:port[/db]; empty = single node", func(c *Config) any { return &c.Cluster.URL }},
	{"cluster.node_id", "this node's id on the bus, unique in the cluster; empty = generated at start and logged", func(c *Config) any { return &c.Cluster.NodeID }},
	{"cluster.prefix", "first part of every bus subject or Redis channel, so clusters can share a bus", func(c *Config) any { return &c.Cluster.Prefix }},
	{"cluster.heartbeat", "how often the node announces its share of the cluster's state (members, subscriptions)", func(c *Config) any { return &c.Cluster.Heartbeat }},
	{"cluster.node_timeout", "a node unheard this long is dead: its members and subscriptions leave the cluster's state", func(c *Config) any { return &c.Cluster.NodeTimeout }},
	{"cluster.secret", "secret every node shares: bus messages are sealed with it, others refused; required with cluster.url (openssl rand -hex 32; prefer cluster.secret_file)", func(c *Config) any { return &c.Cluster.Secret }},
	{"cluster.secret_file", "file holding cluster.secret", func(c *Config) any { return &c.Cluster.SecretFile }},
	{"cluster.insecure", "let a cluster start without cluster.secret: bus messages unsealed, whoever can publish on the bus is believed", func(c *Config) any { return &c.Cluster.Insecure }},
	{"cluster.accept_secret", "a second secret whose bus messages are accepted, never sent with: for a rotation", func(c *Config) any { return &c.Cluster.AcceptSecret }},
	{"cluster.accept_secret_file", "file holding cluster.accept_secret", func(c *Config) any { return &c.Cluster.AcceptSecretFile }},
	{"cluster.encrypt", "encrypt bus payloads and the history events kept on the bus server (needs cluster.secret)", func(c *Config) any { return &c.Cluster.Encrypt }},
	{"cluster.bundles", "send a publish call's events of one channel as one bus message while every node reads them", func(c *Config) any { return &c.Cluster.Bundles }},
	{"cluster.clock_skew", "how far the nodes' clocks may disagree: sealed messages sent longer ago are refused", func(c *Config) any { return &c.Cluster.ClockSkew }},
	{"cluster.tls_ca_file", "CA certificates (PEM) that verify the bus server; empty = the system's", func(c *Config) any { return &c.Cluster.TLSCAFile }},
	{"cluster.tls_cert_file", "this node's client certificate (PEM) for the bus server", func(c *Config) any { return &c.Cluster.TLSCertFile }},
	{"cluster.tls_key_file", "the key (PEM) of cluster.tls_cert_file", func(c *Config) any { return &c.Cluster.TLSKeyFile }},
	{"cluster.nats_creds_file", "NATS credentials file (.creds: user JWT and nkey seed)", func(c *Config) any { return &c.Cluster.NATSCredsFile }},
	{"cluster.nats_nkey_file", "file holding a NATS user's nkey seed", func(c *Config) any { return &c.Cluster.NATSNKeyFile }},
	{"cluster.nats_ping_interval", "how often the node pings its NATS server", func(c *Config) any { return &c.Cluster.NATSPingInterval }},
	{"cluster.nats_pings_outstanding", "unanswered pings after which the NATS connection is stale and reconnected", func(c *Config) any { return &c.Cluster.NATSPingsOutstanding }},
}, webhookSettings, appStoreSettings, tlsSettings)

// env is the setting's environment variable.
func (s setting) env() string {
	return "HERALD_" + strings.ToUpper(strings.ReplaceAll(s.key, ".", "_"))
}

// flag is the setting's flag, without dashes.
func (s setting) flag() string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(s.key)
}

// appField is one key of an app in the file; the first three can also come from
// HERALD_APP_ID, --app-id and so on.
type appField struct {
	key string
	ref func(*AppConfig) any // *string, *bool or *[]string
}

var appFields = []appField{
	{"id", func(a *AppConfig) any { return &a.ID }},
	{"key", func(a *AppConfig) any { return &a.Key }},
	{"secret", func(a *AppConfig) any { return &a.Secret }},
	{"enable_client_messages", func(a *AppConfig) any { return &a.EnableClientMessages }},
	{"enable_user_authentication", func(a *AppConfig) any { return &a.EnableUserAuthentication }},
	{"allowed_origins", func(a *AppConfig) any { return &a.AllowedOrigins }},
	{"enable_subscription_count_event", func(a *AppConfig) any { return &a.EnableSubscriptionCountEvent }},
}

const appCredentials = 3 // appFields[:3] are settable from the environment and flags

func (f appField) env() string  { return "HERALD_APP_" + strings.ToUpper(f.key) }
func (f appField) flag() string { return "app-" + f.key }

// limitFields are the keys of an app's limits table.
var limitFields = []struct {
	key string
	ref func(*herald.Limits) *int
}{
	{"max_connections", func(l *herald.Limits) *int { return &l.MaxConnections }},
	{"max_channel_name_length", func(l *herald.Limits) *int { return &l.MaxChannelNameLength }},
	{"max_event_name_length", func(l *herald.Limits) *int { return &l.MaxEventNameLength }},
	{"max_event_payload_bytes", func(l *herald.Limits) *int { return &l.MaxEventPayloadBytes }},
	{"max_channels_per_event", func(l *herald.Limits) *int { return &l.MaxChannelsPerEvent }},
	{"max_batch_size", func(l *herald.Limits) *int { return &l.MaxBatchSize }},
	{"max_presence_members", func(l *herald.Limits) *int { return &l.MaxPresenceMembers }},
	{"max_presence_member_bytes", func(l *herald.Limits) *int { return &l.MaxPresenceMemberBytes }},
	{"max_presence_user_id_length", func(l *herald.Limits) *int { return &l.MaxPresenceUserIDLength }},
	{"max_channels_per_conn", func(l *herald.Limits) *int { return &l.MaxChannelsPerConn }},
	{"max_client_events_per_second", func(l *herald.Limits) *int { return &l.MaxClientEventsPerSecond }},
	{"max_subscriptions_per_second", func(l *herald.Limits) *int { return &l.MaxSubscriptionsPerSecond }},
	{"max_api_requests_per_second", func(l *herald.Limits) *int { return &l.MaxAPIRequestsPerSecond }},
}

// parseDuration reads an integer number of seconds or a Go duration string.
func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return secondsDuration(n)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, fmt.Errorf("invalid duration %q: want seconds or a duration such as \"10s\" or \"1m30s\"", s)
	}
	return Duration{d}, nil
}

func secondsDuration(n int64) (Duration, error) {
	if n > math.MaxInt64/int64(time.Second) || n < math.MinInt64/int64(time.Second) {
		return Duration{}, fmt.Errorf("duration of %d seconds is too long", n)
	}
	return Duration{time.Duration(n) * time.Second}, nil
}

// UnmarshalText reads "10s", "1m30s" or "10" (seconds); it serves environment variables and flags.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// UnmarshalYAML reads a YAML integer (seconds) or string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("want a duration such as \"10s\" or a number of seconds")
	}
	return d.UnmarshalText([]byte(n.Value))
}

// UnmarshalTOML reads a TOML integer (seconds) or string.
func (d *Duration) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		s, err := secondsDuration(v)
		if err != nil {
			return err
		}
		*d = s
		return nil
	case string:
		return d.UnmarshalText([]byte(v))
	}
	return fmt.Errorf("want a duration such as \"10s\" or a number of seconds, not %T", v)
}
