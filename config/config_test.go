package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// load runs Load with env as the whole environment and usage output discarded.
func load(t testing.TB, args []string, env map[string]string) (Config, error) {
	t.Helper()
	return loadTo(args, func(k string) string { return env[k] }, io.Discard, testChecks())
}

// writeFile writes a config file into a fresh temporary directory and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func secs(n int) Duration { return Duration{time.Duration(n) * time.Second} }

func TestLoadConfigDefaults(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Host:                 "127.0.0.1",
		Port:                 6001,
		ShutdownTimeout:      secs(10),
		ActivityTimeout:      secs(120),
		PongTimeout:          secs(30),
		MaxMessageBytes:      65536,
		OutboundBufferBytes:  1048576,
		WriteDelay:           Duration{2 * time.Millisecond},
		RESTTimestampWindow:  secs(600),
		HandshakeTimeout:     secs(5),
		RESTRequestTimeout:   secs(10),
		RESTIdleTimeout:      secs(30),
		MaxHTTPConnections:   256,
		RESTReplayMaxPerApp:  1 << 20,
		ConnectionIPv6Prefix: 64,
		ConnectionRatePerIP:  20,
		ConnectionBurstPerIP: 100,
		Memory:               MemoryConfig{RefuseAbovePercent: 90, AcceptBelowPercent: 80},
		Cache:                CacheConfig{MaxBytes: 67108864, MaxBytesPerApp: 16777216, TTL: secs(1800)},
		History: HistoryConfig{MaxBytesPerApp: 64 << 20, ReplayBytesPerSecond: 256 << 20, ReplayBytesPerSecondPerApp: 128 << 20,
			ReplayBytesPerSecondPerAddress: 32 << 20, ReplayBytesPerSecondPerConnection: 8 << 20, Linger: secs(60)},
		Publish:  PublishConfig{IdempotencyWindow: secs(300), IdempotencyMaxKeys: 1 << 20},
		Metrics:  MetricsConfig{Enabled: true, Host: "127.0.0.1", Port: 9601, Prefix: "herald_"},
		Pprof:    PprofConfig{MutexFraction: 10, BlockRate: 100000},
		Log:      LogConfig{Level: "info", Format: "text"},
		Cluster:  ClusterConfig{Prefix: "herald", Heartbeat: secs(2), NodeTimeout: secs(10), ClockSkew: secs(60), Bundles: true, NATSPingInterval: secs(3), NATSPingsOutstanding: 3},
		Shutdown: ShutdownConfig{DrainDelay: secs(5)},
		Console:  ConsoleConfig{SessionLifetime: secs(12 * 3600)},
		Webhooks: defaultWebhooks(),
		AppStore: defaultAppStore(),
		Apps: []AppConfig{{ID: "app-id", Key: "app-key", Secret: "app-secret",
			EnableClientMessages: true, EnableUserAuthentication: true}},

		SocketSendBufferBytes: 65536, FrameTimeout: secs(20),
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if !c.UsedDefaultApp() {
		t.Error("UsedDefaultApp() = false with no app configured")
	}
}

const fullYAML = `
host: 0.0.0.0
port: 7001
max_connections: 5000
shutdown_timeout: 1m30s
activity_timeout: 60
pong_timeout: 15s
max_message_bytes: 32768
outbound_buffer_bytes: 65536
socket_send_buffer_bytes: 32768
frame_timeout: 5s
workers: 4
write_delay: 3ms
rest_timestamp_window: 300
handshake_timeout: 3s
rest_request_timeout: 4s
rest_idle_timeout: 45s
max_http_connections: 64
rest_replay_protection: true
rest_replay_max_per_app: 65536
connection_ipv6_prefix: 56
connection_rate_per_ip: 20
connection_burst_per_ip: 40
memory: { limit_bytes: 1000000000, refuse_above_percent: 85, accept_below_percent: 70 }
cache: { max_bytes: 33554432, max_bytes_per_app: 8388608, ttl: 10m }
metrics: { enabled: false, host: 0.0.0.0, port: 9700, prefix: soketi_ }
pprof: { addr: "127.0.0.1:6060", mutex_fraction: 5, block_rate: 1000 }
log: { level: debug, format: json }
cluster: { url: "nats://127.0.0.1:4222,nats://127.0.0.2:4222", node_id: node-1, prefix: prod.herald, heartbeat: 500ms, node_timeout: 4, insecure: true }
shutdown: { drain_delay: 2500ms }
apps:
  - id: "1001"
    key: key-one
    secret: secret-one
    enable_client_messages: true
    allowed_origins: ["https://app.example.com", "*.example.org"]
    limits:
      max_presence_members: 200
      max_channels_per_conn: 50
      max_client_events_per_second: 20
      max_api_requests_per_second: 500
  - id: "1002"
    key: key-two
    secret: secret-two
    enable_user_authentication: true
`

const fullTOML = `
host = "0.0.0.0"
port = 7001
max_connections = 5000
shutdown_timeout = "1m30s"
activity_timeout = 60
pong_timeout = "15s"
max_message_bytes = 32768
outbound_buffer_bytes = 65536
socket_send_buffer_bytes = 32768
frame_timeout = "5s"
workers = 4
write_delay = "3ms"
rest_timestamp_window = 300
handshake_timeout = "3s"
rest_request_timeout = "4s"
rest_idle_timeout = 45
max_http_connections = 64
rest_replay_protection = true
rest_replay_max_per_app = 65536
connection_ipv6_prefix = 56
connection_rate_per_ip = 20
connection_burst_per_ip = 40

[memory]
limit_bytes = 1000000000
refuse_above_percent = 85
accept_below_percent = 70

[cache]
max_bytes = 33554432
max_bytes_per_app = 8388608
ttl = "10m"

[metrics]
enabled = false
host = "0.0.0.0"
port = 9700
prefix = "soketi_"

[pprof]
addr = "127.0.0.1:6060"
mutex_fraction = 5
block_rate = 1000

[log]
level = "debug"
format = "json"

[cluster]
url = "nats://127.0.0.1:4222,nats://127.0.0.2:4222"
node_id = "node-1"
prefix = "prod.herald"
heartbeat = "500ms"
node_timeout = 4
insecure = true

[shutdown]
drain_delay = "2500ms"

[[apps]]
id = "1001"
key = "key-one"
secret = "secret-one"
enable_client_messages = true
allowed_origins = ["https://app.example.com", "*.example.org"]

[apps.limits]
max_presence_members = 200
max_channels_per_conn = 50
max_client_events_per_second = 20
max_api_requests_per_second = 500

[[apps]]
id = "1002"
key = "key-two"
secret = "secret-two"
enable_user_authentication = true
`

var fullWant = Config{
	Host:                "0.0.0.0",
	Port:                7001,
	MaxConnections:      5000,
	ShutdownTimeout:     secs(90),
	ActivityTimeout:     secs(60),
	PongTimeout:         secs(15),
	MaxMessageBytes:     32768,
	OutboundBufferBytes: 65536,
	WriteDelay:          Duration{3 * time.Millisecond},
	Workers:             4,
	RESTTimestampWindow: secs(300),
	HandshakeTimeout:    secs(3),
	RESTRequestTimeout:  secs(4), RESTIdleTimeout: secs(45), MaxHTTPConnections: 64, RESTReplayProtection: true,
	RESTReplayMaxPerApp: 65536, ConnectionIPv6Prefix: 56, ConnectionRatePerIP: 20, ConnectionBurstPerIP: 40,
	Memory:  MemoryConfig{LimitBytes: 1000000000, RefuseAbovePercent: 85, AcceptBelowPercent: 70},
	Cache:   CacheConfig{MaxBytes: 33554432, MaxBytesPerApp: 8388608, TTL: secs(600)},
	History: historyWith(64 << 20),
	Publish: defaultPublish(),
	Metrics: MetricsConfig{Enabled: false, Host: "0.0.0.0", Port: 9700, Prefix: "soketi_"},
	Pprof:   PprofConfig{Addr: "127.0.0.1:6060", MutexFraction: 5, BlockRate: 1000},
	Log:     LogConfig{Level: "debug", Format: "json"},
	Cluster: ClusterConfig{URL: "nats://127.0.0.1:4222,nats://127.0.0.2:4222", NodeID: "node-1", Prefix: "prod.herald", Insecure: true,
		Heartbeat: Duration{500 * time.Millisecond}, NodeTimeout: secs(4), ClockSkew: secs(60), Bundles: true, NATSPingInterval: secs(3), NATSPingsOutstanding: 3},
	Shutdown: ShutdownConfig{DrainDelay: Duration{2500 * time.Millisecond}},
	Console:  ConsoleConfig{SessionLifetime: secs(12 * 3600)},
	Webhooks: defaultWebhooks(),
	AppStore: defaultAppStore(),
	Apps: []AppConfig{
		{ID: "1001", Key: "key-one", Secret: "secret-one", EnableClientMessages: true,
			AllowedOrigins: []string{"https://app.example.com", "*.example.org"},
			Limits:         herald.Limits{MaxPresenceMembers: 200, MaxChannelsPerConn: 50, MaxClientEventsPerSecond: 20, MaxAPIRequestsPerSecond: 500}},
		{ID: "1002", Key: "key-two", Secret: "secret-two", EnableUserAuthentication: true},
	},

	SocketSendBufferBytes: 32768, FrameTimeout: secs(5),
}

func TestLoadConfigFileFormats(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"herald.yaml", fullYAML},
		{"herald.yml", fullYAML},
		{"herald.toml", fullTOML},
		{"HERALD.TOML", fullTOML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, []string{"--config", writeFile(t, tc.name, tc.content)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, fullWant) {
				t.Fatalf("\n got %+v\nwant %+v", c, fullWant)
			}
			if c.UsedDefaultApp() {
				t.Error("UsedDefaultApp() = true with apps from the file")
			}
		})
	}
}

func TestLoadConfigEmptyFile(t *testing.T) {
	for _, name := range []string{"empty.yaml", "empty.toml"} {
		c, err := load(t, []string{"--config", writeFile(t, name, "")}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(c, defaultConfig()) {
			t.Errorf("%s: got %+v, want the defaults", name, c)
		}
	}
}

func TestLoadConfigPrecedence(t *testing.T) {
	file := writeFile(t, "herald.yaml", "port: 7001\nhost: file.example\nlog: {level: warn}\n")
	other := writeFile(t, "other.yaml", "port: 7002\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want func(*Config)
	}{
		{"file", []string{"--config", file}, nil,
			func(c *Config) { c.Port, c.Host, c.Log.Level = 7001, "file.example", "warn" }},
		{"HERALD_CONFIG names the file", nil, map[string]string{"HERALD_CONFIG": file},
			func(c *Config) { c.Port, c.Host, c.Log.Level = 7001, "file.example", "warn" }},
		{"--config beats HERALD_CONFIG", []string{"--config", other}, map[string]string{"HERALD_CONFIG": file},
			func(c *Config) { c.Port = 7002 }},
		{`--config "" ignores HERALD_CONFIG`, []string{"--config", ""}, map[string]string{"HERALD_CONFIG": file},
			func(c *Config) {}},
		{"env beats file", []string{"--config", file}, map[string]string{"HERALD_PORT": "8001", "HERALD_LOG_LEVEL": "error"},
			func(c *Config) { c.Port, c.Host, c.Log.Level = 8001, "file.example", "error" }},
		{"flag beats env", []string{"--config", file, "--port", "9001", "-log-level=debug"},
			map[string]string{"HERALD_PORT": "8001", "HERALD_LOG_LEVEL": "error", "HERALD_HOST": "env.example"},
			func(c *Config) { c.Port, c.Host, c.Log.Level = 9001, "env.example", "debug" }},
		{"empty env is unset", nil, map[string]string{"HERALD_HOST": ""}, func(c *Config) {}},
		{"every env var", nil, map[string]string{
			"HERALD_HOST": "h", "HERALD_PORT": "1", "HERALD_MAX_CONNECTIONS": "2", "HERALD_SHUTDOWN_TIMEOUT": "3",
			"HERALD_ACTIVITY_TIMEOUT": "4s", "HERALD_PONG_TIMEOUT": "5s", "HERALD_MAX_MESSAGE_BYTES": "6000",
			"HERALD_OUTBOUND_BUFFER_BYTES": "7000", "HERALD_WORKERS": "8", "HERALD_WRITE_DELAY": "1ms", "HERALD_REST_TIMESTAMP_WINDOW": "9",
			"HERALD_HANDSHAKE_TIMEOUT": "10", "HERALD_CONNECTION_RATE_PER_IP": "11", "HERALD_CONNECTION_BURST_PER_IP": "12",
			"HERALD_MEMORY_LIMIT_BYTES": "13000", "HERALD_MEMORY_REFUSE_ABOVE_PERCENT": "14", "HERALD_MEMORY_ACCEPT_BELOW_PERCENT": "13",
			"HERALD_CACHE_MAX_BYTES": "1000000", "HERALD_CACHE_MAX_BYTES_PER_APP": "500000", "HERALD_CACHE_TTL": "19", "HERALD_HISTORY_MAX_BYTES_PER_APP": "700000",
			"HERALD_HISTORY_REPLAY_BYTES_PER_SECOND": "25", "HERALD_HISTORY_REPLAY_BYTES_PER_SECOND_PER_APP": "26",
			"HERALD_HISTORY_REPLAY_BYTES_PER_SECOND_PER_ADDRESS": "27", "HERALD_HISTORY_REPLAY_BYTES_PER_SECOND_PER_CONNECTION": "28", "HERALD_HISTORY_LINGER": "29", "HERALD_PUBLISH_IDEMPOTENCY_WINDOW": "30s", "HERALD_PUBLISH_IDEMPOTENCY_MAX_KEYS": "2048",
			"HERALD_METRICS_ENABLED": "false", "HERALD_METRICS_HOST": "m", "HERALD_METRICS_PORT": "15", "HERALD_METRICS_PREFIX": "p_",
			"HERALD_PPROF_ADDR": "127.0.0.1:16", "HERALD_PPROF_MUTEX_FRACTION": "17", "HERALD_PPROF_BLOCK_RATE": "18",
			"HERALD_LOG_LEVEL": "warn", "HERALD_LOG_FORMAT": "json",
			"HERALD_REST_REQUEST_TIMEOUT": "19", "HERALD_REST_IDLE_TIMEOUT": "20", "HERALD_MAX_HTTP_CONNECTIONS": "21",
			"HERALD_REST_REPLAY_PROTECTION": "true", "HERALD_REST_REPLAY_MAX_PER_APP": "4096", "HERALD_CONNECTION_IPV6_PREFIX": "48", "HERALD_CONSOLE_SESSION_LIFETIME": "3600", "HERALD_SOCKET_SEND_BUFFER_BYTES": "0", "HERALD_FRAME_TIMEOUT": "22",
			"HERALD_CLUSTER_URL": "redis://:pw@10.0.0.1:6379/2", "HERALD_CLUSTER_NODE_ID": "n-2", "HERALD_CLUSTER_PREFIX": "p",
			"HERALD_CLUSTER_HEARTBEAT": "1", "HERALD_CLUSTER_NODE_TIMEOUT": "3500ms", "HERALD_SHUTDOWN_DRAIN_DELAY": "24", "HERALD_CLUSTER_INSECURE": "true",
		}, func(c *Config) {
			*c = Config{Host: "h", Port: 1, MaxConnections: 2, ShutdownTimeout: secs(3), ActivityTimeout: secs(4),
				PongTimeout: secs(5), MaxMessageBytes: 6000, OutboundBufferBytes: 7000, Workers: 8, WriteDelay: Duration{time.Millisecond},
				RESTTimestampWindow: secs(9), HandshakeTimeout: secs(10), ConnectionRatePerIP: 11, ConnectionBurstPerIP: 12,
				RESTRequestTimeout: secs(19), RESTIdleTimeout: secs(20), MaxHTTPConnections: 21, RESTReplayProtection: true,
				RESTReplayMaxPerApp: 4096, ConnectionIPv6Prefix: 48, Console: ConsoleConfig{SessionLifetime: secs(3600)},
				Memory: MemoryConfig{LimitBytes: 13000, RefuseAbovePercent: 14, AcceptBelowPercent: 13},
				Cache:  CacheConfig{MaxBytes: 1000000, MaxBytesPerApp: 500000, TTL: secs(19)},
				History: HistoryConfig{MaxBytesPerApp: 700000, ReplayBytesPerSecond: 25, ReplayBytesPerSecondPerApp: 26,
					ReplayBytesPerSecondPerAddress: 27, ReplayBytesPerSecondPerConnection: 28, Linger: secs(29)},
				Publish: PublishConfig{IdempotencyWindow: secs(30), IdempotencyMaxKeys: 2048},
				Metrics: MetricsConfig{Enabled: false, Host: "m", Port: 15, Prefix: "p_"},
				Pprof:   PprofConfig{Addr: "127.0.0.1:16", MutexFraction: 17, BlockRate: 18},
				Log:     LogConfig{"warn", "json"}, Apps: c.Apps, Webhooks: c.Webhooks, AppStore: c.AppStore,
				Cluster: ClusterConfig{URL: "redis://:pw@10.0.0.1:6379/2", NodeID: "n-2", Prefix: "p", Insecure: true,
					Heartbeat: secs(1), NodeTimeout: Duration{3500 * time.Millisecond}, ClockSkew: secs(60), Bundles: true, NATSPingInterval: secs(3), NATSPingsOutstanding: 3},
				FrameTimeout: secs(22), Shutdown: ShutdownConfig{DrainDelay: secs(24)}}
		}},
		{"every flag", []string{"--host", "h", "--port", "1", "--max-connections", "2", "--shutdown-timeout", "3",
			"--activity-timeout", "4s", "--pong-timeout", "5s", "--max-message-bytes", "6000",
			"--outbound-buffer-bytes", "7000", "--workers", "8", "--write-delay", "0", "--rest-timestamp-window", "9",
			"--handshake-timeout", "10", "--connection-rate-per-ip", "11", "--connection-burst-per-ip", "12",
			"--memory-limit-bytes", "13000", "--memory-refuse-above-percent", "14", "--memory-accept-below-percent", "13",
			"--cache-max-bytes", "1000000", "--cache-max-bytes-per-app", "500000", "--cache-ttl", "19s", "--history-max-bytes-per-app", "700000",
			"--history-replay-bytes-per-second", "0", "--history-replay-bytes-per-second-per-app", "0",
			"--history-replay-bytes-per-second-per-address", "0", "--history-replay-bytes-per-second-per-connection", "0", "--history-linger", "0", "--publish-idempotency-window", "45s", "--publish-idempotency-max-keys", "4096",
			"--metrics-enabled=false", "--metrics-host", "m", "--metrics-port", "15", "--metrics-prefix", "p_",
			"--pprof-addr", "127.0.0.1:16", "--pprof-mutex-fraction", "17", "--pprof-block-rate", "18",
			"--log-level", "warn", "--log-format", "json",
			"--rest-request-timeout", "19", "--rest-idle-timeout", "20", "--max-http-connections", "21", "--rest-replay-protection", "--rest-replay-max-per-app", "8192", "--connection-ipv6-prefix", "128", "--console-session-lifetime", "30m",
			"--socket-send-buffer-bytes", "8192", "--frame-timeout", "23s",
			"--cluster-url", "rediss://u:pw@redis.example:6380", "--cluster-node-id", "n.3", "--cluster-prefix", "a.b",
			"--cluster-heartbeat", "250ms", "--cluster-node-timeout", "1s", "--shutdown-drain-delay", "25s",
			"--cluster-secret", strings.Repeat("s", 32), "--cluster-accept-secret", strings.Repeat("t", 40), "--cluster-encrypt",
			"--cluster-clock-skew", "30s"}, nil,
			func(c *Config) {
				*c = Config{Host: "h", Port: 1, MaxConnections: 2, ShutdownTimeout: secs(3), ActivityTimeout: secs(4),
					PongTimeout: secs(5), MaxMessageBytes: 6000, OutboundBufferBytes: 7000, Workers: 8,
					RESTTimestampWindow: secs(9), HandshakeTimeout: secs(10), ConnectionRatePerIP: 11, ConnectionBurstPerIP: 12,
					RESTRequestTimeout: secs(19), RESTIdleTimeout: secs(20), MaxHTTPConnections: 21, RESTReplayProtection: true,
					RESTReplayMaxPerApp: 8192, ConnectionIPv6Prefix: 128, Console: ConsoleConfig{SessionLifetime: secs(1800)},
					Memory:  MemoryConfig{LimitBytes: 13000, RefuseAbovePercent: 14, AcceptBelowPercent: 13},
					Cache:   CacheConfig{MaxBytes: 1000000, MaxBytesPerApp: 500000, TTL: secs(19)},
					History: HistoryConfig{MaxBytesPerApp: 700000},
					Publish: PublishConfig{IdempotencyWindow: secs(45), IdempotencyMaxKeys: 4096},

					Metrics: MetricsConfig{Enabled: false, Host: "m", Port: 15, Prefix: "p_"},
					Pprof:   PprofConfig{Addr: "127.0.0.1:16", MutexFraction: 17, BlockRate: 18},
					Log:     LogConfig{"warn", "json"}, Apps: c.Apps, Webhooks: c.Webhooks, AppStore: c.AppStore,
					Cluster: ClusterConfig{URL: "rediss://u:pw@redis.example:6380", NodeID: "n.3", Prefix: "a.b",
						Heartbeat: Duration{250 * time.Millisecond}, NodeTimeout: secs(1),
						Secret: strings.Repeat("s", 32), AcceptSecret: strings.Repeat("t", 40), Encrypt: true, ClockSkew: secs(30), Bundles: true, NATSPingInterval: secs(3), NATSPingsOutstanding: 3},
					SocketSendBufferBytes: 8192, FrameTimeout: secs(23), Shutdown: ShutdownConfig{DrainDelay: secs(25)}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := defaultConfig()
			tc.want(&want)
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, want) {
				t.Fatalf("\n got %+v\nwant %+v", c, want)
			}
		})
	}
}

func TestLoadConfigDurations(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string // file name and content, "name:content"
		args []string
		env  map[string]string
		want time.Duration
	}{
		{"yaml string", "c.yaml:shutdown_timeout: 10s", nil, nil, 10 * time.Second},
		{"yaml compound", "c.yaml:shutdown_timeout: 1m30s", nil, nil, 90 * time.Second},
		{"yaml integer seconds", "c.yaml:shutdown_timeout: 10", nil, nil, 10 * time.Second},
		{"yaml quoted seconds", `c.yaml:shutdown_timeout: "10"`, nil, nil, 10 * time.Second},
		{"yaml milliseconds", "c.yaml:shutdown_timeout: 1500ms", nil, nil, 1500 * time.Millisecond},
		{"toml string", `c.toml:shutdown_timeout = "10s"`, nil, nil, 10 * time.Second},
		{"toml integer seconds", "c.toml:shutdown_timeout = 10", nil, nil, 10 * time.Second},
		{"env string", "", nil, map[string]string{"HERALD_SHUTDOWN_TIMEOUT": "2m"}, 2 * time.Minute},
		{"env seconds", "", nil, map[string]string{"HERALD_SHUTDOWN_TIMEOUT": "45"}, 45 * time.Second},
		{"flag string", "", []string{"--shutdown-timeout=1h"}, nil, time.Hour},
		{"flag seconds", "", []string{"--shutdown-timeout", "5"}, nil, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if name, content, ok := strings.Cut(tc.file, ":"); ok {
				args = append([]string{"--config", writeFile(t, name, content+"\n")}, args...)
			}
			c, err := load(t, args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.ShutdownTimeout.Duration != tc.want {
				t.Fatalf("shutdown_timeout = %v, want %v", c.ShutdownTimeout, tc.want)
			}
		})
	}
}

func TestLoadConfigAppFromEnvAndFlags(t *testing.T) {
	one := writeFile(t, "one.yaml", `
apps:
  - id: file-id
    key: file-key
    secret: file-secret
    enable_client_messages: false
    limits: {max_batch_size: 5}
`)
	two := writeFile(t, "two.yaml", `
apps:
  - {id: a, key: a, secret: a}
  - {id: b, key: b, secret: b}
`)
	creds := map[string]string{"HERALD_APP_ID": "env-id", "HERALD_APP_KEY": "env-key", "HERALD_APP_SECRET": "env-secret"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    AppConfig
		wantErr string
	}{
		{"env replaces the default app", nil, creds,
			AppConfig{ID: "env-id", Key: "env-key", Secret: "env-secret", EnableClientMessages: true, EnableUserAuthentication: true}, ""},
		{"flags replace the default app", []string{"--app-id", "f-id", "--app-key", "f-key", "--app-secret", "f-secret"}, nil,
			AppConfig{ID: "f-id", Key: "f-key", Secret: "f-secret", EnableClientMessages: true, EnableUserAuthentication: true}, ""},
		{"flag beats env", []string{"--app-secret", "f-secret"}, creds,
			AppConfig{ID: "env-id", Key: "env-key", Secret: "f-secret", EnableClientMessages: true, EnableUserAuthentication: true}, ""},
		{"env replaces the file's single app, keeping its switches and limits", []string{"--config", one}, creds,
			AppConfig{ID: "env-id", Key: "env-key", Secret: "env-secret", Limits: herald.Limits{MaxBatchSize: 5}}, ""},
		{"unset credentials come from the file's app", []string{"--config", one}, map[string]string{"HERALD_APP_SECRET": "s"},
			AppConfig{ID: "file-id", Key: "file-key", Secret: "s", Limits: herald.Limits{MaxBatchSize: 5}}, ""},
		{"no fallback to the development credentials", nil, map[string]string{"HERALD_APP_KEY": "k"}, AppConfig{},
			"apps[0].secret: must not be empty (from env HERALD_APP_KEY, which replaces the app; set HERALD_APP_SECRET or --app-secret too)"},
		{"two apps in the file", []string{"--config", two}, map[string]string{"HERALD_APP_KEY": "k"}, AppConfig{},
			"apps: HERALD_APP_* and --app-* replace the single app, but file " + two + " defines 2 apps (from env HERALD_APP_KEY)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Apps, []AppConfig{tc.want}) {
				t.Fatalf("apps:\n got %+v\nwant %+v", c.Apps, []AppConfig{tc.want})
			}
			if c.UsedDefaultApp() {
				t.Error("UsedDefaultApp() = true")
			}
		})
	}
}

func TestLoadConfigProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string // "name:content", or empty
		args []string
		env  map[string]string
		want string
	}{
		{"port too high", "", []string{"--port", "70000"}, nil, "port: 70000 out of range 1..65535 (from flag --port)"},
		{"port zero", "c.yaml:port: 0", nil, nil, "port: 0 out of range 1..65535 (from file "},
		{"port not a number", "", nil, map[string]string{"HERALD_PORT": "http"}, `port: "http" is not an integer (from env HERALD_PORT)`},
		{"env over an unreadable file value is still checked", "c.yaml:port: [1]", nil, map[string]string{"HERALD_PORT": "70000"},
			"port: 70000 out of range 1..65535 (from env HERALD_PORT)"},
		{"port wrong type in yaml", "c.yaml:port: [1]", nil, nil, "port: line 1: cannot unmarshal !!seq into int (from file "},
		{"port wrong type in toml", `c.toml:port = "x"`, nil, nil, "port: line 1: incompatible types: TOML value has type string; destination has type integer (from file "},
		{"empty host", "", []string{"--host", ""}, nil, "host: must not be empty (from flag --host)"},
		{"refuse percent over 100", "", []string{"--memory-refuse-above-percent", "101"}, nil,
			"memory.refuse_above_percent: 101 out of range 1..100 (from flag --memory-refuse-above-percent)"},
		{"accept percent not below refuse", "c.yaml:memory: {refuse_above_percent: 70, accept_below_percent: 80}", nil, nil,
			"memory.accept_below_percent: 80 must be below memory.refuse_above_percent (70) (from file "},
		{"cache per app above the node", "", []string{"--cache-max-bytes", "1048576", "--cache-max-bytes-per-app", "2097152"}, nil,
			"cache.max_bytes_per_app: 2097152 must not be above cache.max_bytes (1048576) (from flag --cache-max-bytes-per-app)"},
		{"cache bound too small", "c.yaml:cache: {max_bytes: 1000}", nil, nil, "cache.max_bytes: 1000 must be at least 65536 (from file "},
		{"cache ttl too short", "", nil, map[string]string{"HERALD_CACHE_TTL": "10ms"}, "cache.ttl: 10ms must be at least 1s (from env HERALD_CACHE_TTL)"},
		{"metrics port out of range", "", nil, map[string]string{"HERALD_METRICS_PORT": "-1"}, "metrics.port: -1 out of range 0..65535 (from env HERALD_METRICS_PORT)"},
		{"metrics port is the api port", "", []string{"--metrics-port", "6001"}, nil, "metrics.port: 6001 is the API's port; metrics need their own (from flag --metrics-port)"},
		{"metrics prefix", "", []string{"--metrics-prefix", "my-prefix"}, nil, `metrics.prefix: "my-prefix" must match [a-zA-Z_][a-zA-Z0-9_]* (from flag --metrics-prefix)`},
		{"a bare bool flag is true and does not take the next argument", "", []string{"--metrics-enabled", "--metrics-port", "70000"}, nil,
			"metrics.port: 70000 out of range 0..65535 (from flag --metrics-port)"},
		{"metrics enabled not a bool", "", []string{"--metrics-enabled=yes please"}, nil, `metrics.enabled: "yes please" is not true or false (from flag --metrics-enabled)`},
		{"pprof addr", "", []string{"--pprof-addr", "6060"}, nil, `pprof.addr: "6060" is not host:port (from flag --pprof-addr)`},
		{"handshake timeout too short", "", []string{"--handshake-timeout", "1ms"}, nil, "handshake_timeout: 1ms must be at least 100ms (from flag --handshake-timeout)"},
		{"rest request timeout below the handshake's", "", []string{"--handshake-timeout", "8s", "--rest-request-timeout", "6s"}, nil,
			"rest_request_timeout: 6s must be at least handshake_timeout (8s): a WebSocket upgrade is an HTTP request too (from flag --rest-request-timeout)"},
		{"console session", "", nil, map[string]string{"HERALD_CONSOLE_SESSION_LIFETIME": "30s"}, "console.session_lifetime: 30s must be from 1m to 168h0m0s (from env HERALD_CONSOLE_SESSION_LIFETIME)"},
		{"ipv6 prefix", "", nil, map[string]string{"HERALD_CONNECTION_IPV6_PREFIX": "129"}, "connection_ipv6_prefix: 129 must be from 32 to 128 (64 groups the addresses of one /64) (from env HERALD_CONNECTION_IPV6_PREFIX)"},
		{"replay bound too small", "", nil, map[string]string{"HERALD_REST_REPLAY_MAX_PER_APP": "10"}, "rest_replay_max_per_app: 10 must be at least 1024 (from env HERALD_REST_REPLAY_MAX_PER_APP)"},
		{"max http connections too few", "", nil, map[string]string{"HERALD_MAX_HTTP_CONNECTIONS": "2"}, "max_http_connections: 2 must be at least 8 (from env HERALD_MAX_HTTP_CONNECTIONS)"},
		{"rest idle timeout too short", "c.yaml:rest_idle_timeout: 1ms", nil, nil, "rest_idle_timeout: 1ms must be at least 100ms (from file "},
		{"negative ip rate", "", []string{"--connection-rate-per-ip", "-3"}, nil, "connection_rate_per_ip: -3 must not be negative (from flag --connection-rate-per-ip)"},
		{"idempotency window too short", "", []string{"--publish-idempotency-window", "10ms"}, nil, "publish.idempotency_window: 10ms must be from 1s to 24h (from flag --publish-idempotency-window)"},
		{"idempotency keys too few", "", nil, map[string]string{"HERALD_PUBLISH_IDEMPOTENCY_MAX_KEYS": "10"}, "publish.idempotency_max_keys: 10 must be at least 1024 (from env HERALD_PUBLISH_IDEMPOTENCY_MAX_KEYS)"},
		{"bad origin", "c.yaml:apps: [{id: a, key: k, secret: s, allowed_origins: [\"https://x.com/path\"]}]", nil, nil,
			`apps[0].allowed_origins: origin "https://x.com/path": want scheme://host[:port], host[:port] or *.domain (from file `},
		{"origins not a list", "c.yaml:apps: [{id: a, key: k, secret: s, allowed_origins: {a: 1}}]", nil, nil,
			"apps[0].allowed_origins: "},
		{"negative max_connections", "", []string{"--max-connections", "-1"}, nil, "max_connections: -1 must not be negative (from flag --max-connections)"},
		{"negative workers", "", nil, map[string]string{"HERALD_WORKERS": "-2"}, "workers: -2 must not be negative (from env HERALD_WORKERS)"},
		{"write delay too long", "", nil, map[string]string{"HERALD_WRITE_DELAY": "1s"}, "write_delay: 1s out of range 0..50ms (from env HERALD_WRITE_DELAY)"},
		{"zero shutdown_timeout", "c.yaml:shutdown_timeout: 0s", nil, nil, "shutdown_timeout: 0s must be positive (from file "},
		{"negative shutdown_timeout", "", []string{"--shutdown-timeout", "-5s"}, nil, "shutdown_timeout: -5s must be positive (from flag --shutdown-timeout)"},
		{"bad duration", "", []string{"--shutdown-timeout", "soon"}, nil, `shutdown_timeout: invalid duration "soon"`},
		{"float duration", "c.yaml:pong_timeout: 1.5", nil, nil, `pong_timeout: line 1: invalid duration "1.5"`},
		{"duration overflow", "c.yaml:pong_timeout: 9223372036854775807", nil, nil, "pong_timeout: line 1: duration of 9223372036854775807 seconds is too long"},
		{"short activity_timeout", "", []string{"--activity-timeout", "500ms"}, nil, "activity_timeout: 500ms must be at least 1s (from flag --activity-timeout)"},
		{"short pong_timeout", "", nil, map[string]string{"HERALD_PONG_TIMEOUT": "0"}, "pong_timeout: 0s must be at least 1s (from env HERALD_PONG_TIMEOUT)"},
		{"zero rest_timestamp_window", "", []string{"--rest-timestamp-window", "0"}, nil, "rest_timestamp_window: 0s must be positive (from flag --rest-timestamp-window)"},
		{"small max_message_bytes", "", []string{"--max-message-bytes", "1023"}, nil, "max_message_bytes: 1023 must be at least 1024 (from flag --max-message-bytes)"},
		{"small outbound_buffer_bytes", "", []string{"--outbound-buffer-bytes", "4095"}, nil, "outbound_buffer_bytes: 4095 must be at least 4096 (from flag --outbound-buffer-bytes)"},
		{"small socket_send_buffer_bytes", "", []string{"--socket-send-buffer-bytes", "100"}, nil, "socket_send_buffer_bytes: 100 must be at least 4096 (from flag --socket-send-buffer-bytes)"},
		{"short frame_timeout", "", nil, map[string]string{"HERALD_FRAME_TIMEOUT": "500ms"}, "frame_timeout: 500ms must be at least 1s (from env HERALD_FRAME_TIMEOUT)"},
		{"bad log level", "c.yaml:log: {level: verbose}", nil, nil, `log.level: "verbose" is not one of debug, info, warn, error (from file `},
		{"bad log format", "", []string{"--log-format", "xml"}, nil, `log.format: "xml" is not one of text, json (from flag --log-format)`},
		{"cluster url scheme", "", []string{"--cluster-url", "http://bus:4222"}, nil,
			`cluster.url: unknown scheme "http": want nats://, tls://, redis://, rediss://, redis+cluster:// or redis+sentinel:// (from flag --cluster-url)`},
		{"cluster url without scheme", "", nil, map[string]string{"HERALD_CLUSTER_URL": "127.0.0.1:4222"},
			"cluster.url: want nats://host:port, tls://host:port (NATS over TLS), redis://host:port/db or rediss://host:port/db (several: shards), redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/master (from env HERALD_CLUSTER_URL)"},
		{"cluster url mixing engines", `c.yaml:cluster: {url: "nats://a:4222,redis://b:6379"}`, nil, nil,
			`cluster.url: server 2: scheme "redis": want nats:// or tls:// (from file `},
		{"cluster url without host", "", []string{"--cluster-url", "redis:///0"}, nil, "cluster.url: no host (from flag --cluster-url)"},
		{"cluster url bad port", "", []string{"--cluster-url", "nats://bus:port"}, nil, `cluster.url: server 1: not a URL: invalid port ":port" after host (from flag --cluster-url)`},
		{"cluster url bad database", "c.toml:[cluster]\nurl = \"redis://bus:6379/zero\"", nil, nil,
			`cluster.url: redis: invalid database number: "zero" (from file `},
		{"cluster node id characters", "", []string{"--cluster-node-id", "node 1"}, nil,
			`cluster.node_id: "node 1" may hold only letters, digits, '_', '.' and '-' (from flag --cluster-node-id)`},
		{"cluster node id length", "", nil, map[string]string{"HERALD_CLUSTER_NODE_ID": strings.Repeat("n", 65)},
			"cluster.node_id: 65 bytes, at most 64 (from env HERALD_CLUSTER_NODE_ID)"},
		{"cluster prefix empty part", "", []string{"--cluster-prefix", "a..b"}, nil,
			`cluster.prefix: "a..b": want printable ASCII without spaces, '*' or '>', and no empty part between dots (from flag --cluster-prefix)`},
		{"cluster prefix wildcard", "", nil, map[string]string{"HERALD_CLUSTER_PREFIX": "herald.*"}, `cluster.prefix: "herald.*": want `},
		{"cluster prefix emptied", `c.yaml:cluster: {prefix: ""}`, nil, nil, `cluster.prefix: "": want `},
		{"unknown cluster key", "c.yaml:cluster: {urls: nats://a}", nil, nil, "cluster.urls: unknown key (from file "},
		{"cluster heartbeat zero", "", []string{"--cluster-heartbeat", "0"}, nil, "cluster.heartbeat: 0s must be positive (from flag --cluster-heartbeat)"},
		{"cluster heartbeat negative", "c.yaml:cluster: {heartbeat: -1s}", nil, nil, "cluster.heartbeat: -1s must be positive (from file "},
		{"cluster node timeout under 3 heartbeats", "", nil, map[string]string{"HERALD_CLUSTER_NODE_TIMEOUT": "5s"},
			"cluster.node_timeout: 5s must be at least 3 × cluster.heartbeat (2s × 3 = 6s) (from env HERALD_CLUSTER_NODE_TIMEOUT)"},
		{"cluster heartbeat raised past the node timeout", "c.toml:[cluster]\nheartbeat = \"4s\"", nil, nil,
			"cluster.node_timeout: 10s must be at least 3 × cluster.heartbeat (4s × 3 = 12s) (default)"},
		{"cluster node timeout bad duration", "", []string{"--cluster-node-timeout", "later"}, nil, `cluster.node_timeout: invalid duration "later"`},
		{"no apps", "c.yaml:apps: []", nil, nil, "apps: at least one app is required (from file "},
		{"null apps", "c.yaml:apps:", nil, nil, "apps: at least one app is required (from file "},
		{"apps not a list", "c.yaml:apps: {id: a}", nil, nil, "apps: line 1: want a list (from file "},
		{"app not a table", "c.yaml:apps: [a]", nil, nil, "apps[0]: line 1: want a table of keys and values (from file "},
		{"empty id", "c.yaml:apps: [{key: k, secret: s}]", nil, nil, "apps[0].id: must not be empty (from file "},
		{"empty key", "c.yaml:apps: [{id: i, secret: s}]", nil, nil, "apps[0].key: must not be empty (from file "},
		{"empty secret", "c.yaml:apps: [{id: i, key: k}]", nil, nil, "apps[0].secret: must not be empty (from file "},
		{"duplicate id", "c.yaml:apps: [{id: i, key: a, secret: s}, {id: i, key: b, secret: s}]", nil, nil, "apps[1].id: duplicate of apps[0].id (from file "},
		{"duplicate key", "c.toml:apps = [{id = \"a\", key = \"k\", secret = \"s\"}, {id = \"b\", key = \"x\", secret = \"s\"}, {id = \"c\", key = \"k\", secret = \"s\"}]", nil, nil,
			"apps[2].key: duplicate of apps[0].key (from file "},
		{"bad id characters", "c.yaml:apps: [{id: 'a b', key: k, secret: s}]", nil, nil, `apps[0].id: "a b" may hold only letters, digits, '_', '.' and '-' (from file `},
		{"bad key characters", "", []string{"--app-id", "i", "--app-key", "k/ey", "--app-secret", "s"}, nil,
			`apps[0].key: "k/ey" may hold only letters, digits, '_', '.' and '-' (from flag --app-key)`},
		{"negative limit", "c.yaml:apps: [{id: i, key: k, secret: s, limits: {max_presence_members: -5}}]", nil, nil,
			"apps[0].limits.max_presence_members: -5 must not be negative (from file "},
		{"limit wrong type", "c.toml:[[apps]]\nid = \"i\"\nkey = \"k\"\nsecret = \"s\"\nlimits = 3", nil, nil,
			"apps[0].limits: want a table of keys and values (from file "},
		{"switch wrong type", "c.yaml:apps: [{id: i, key: k, secret: s, enable_client_messages: maybe}]", nil, nil,
			"apps[0].enable_client_messages: line 1: cannot unmarshal !!str `maybe` into bool (from file "},
		{"unknown top-level key", "c.yaml:prot: 6001", nil, nil, "prot: unknown key (from file "},
		{"unknown nested key", "c.yaml:log: {lvl: debug}", nil, nil, "log.lvl: unknown key (from file "},
		{"unknown app key", "c.toml:[[apps]]\nid = \"i\"\nkey = \"k\"\nsecret = \"s\"\nenable_client_events = true", nil, nil,
			"apps[0].enable_client_events: unknown key (from file "},
		{"unknown limit key", "c.yaml:apps: [{id: i, key: k, secret: s, limits: {max_foo: 1}}]", nil, nil,
			"apps[0].limits.max_foo: unknown key (from file "},
		{"repeated key", "c.yaml:port: 1\nport: 2", nil, nil, "port: key appears more than once (from file "},
		{"top level not a table", "c.yaml:- 1", nil, nil, "config: line 1: want a table of keys and values (from file "},
		{"yaml syntax", "c.yaml:port: [", nil, nil, "config: yaml: line 1: did not find expected node content (from file "},
		{"two yaml documents", "c.yaml:port: 1\n---\nport: 2", nil, nil, "config: yaml: more than one document (from file "},
		{"toml syntax", "c.toml:port = ", nil, nil, "config: toml: line 2 (last key \"port\"): expected value"},
		{"unknown extension", "c.json:{}", nil, nil, `.json" must end in .yaml, .yml or .toml (from flag --config)`},
		{"missing file", "", nil, map[string]string{"HERALD_CONFIG": "/nonexistent/herald.yaml"}, "config: open /nonexistent/herald.yaml: no such file or directory (from env HERALD_CONFIG)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if name, content, ok := strings.Cut(tc.file, ":"); ok {
				args = append([]string{"--config", writeFile(t, name, content+"\n")}, args...)
			}
			_, err := load(t, args, tc.env)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	file := writeFile(t, "herald.yaml", `
port: 70000
log: {format: xml}
apps:
  - {id: a, key: k, secret: s}
  - {id: b, key: k, secret: s, limits: {max_batch_size: -1}}
  - {id: c, key: c, secret: s, colour: red}
`)
	_, err := load(t, []string{"--config", file, "--workers", "-1", "--host", ""},
		map[string]string{"HERALD_PONG_TIMEOUT": "never"})
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		"apps[2].colour: unknown key (from file " + file + ")",
		`pong_timeout: invalid duration "never": want seconds or a duration such as "10s" or "1m30s" (from env HERALD_PONG_TIMEOUT)`,
		"host: must not be empty (from flag --host)",
		"port: 70000 out of range 1..65535 (from file " + file + ")",
		"workers: -1 must not be negative (from flag --workers)",
		`log.format: "xml" is not one of text, json (from file ` + file + ")",
		"apps[1].key: duplicate of apps[0].key (from file " + file + ")",
		"apps[1].limits.max_batch_size: -1 must not be negative (from file " + file + ")",
	}
	got := strings.Split(err.Error(), "\n")
	if got[0] != "invalid configuration:" {
		t.Errorf("first line %q", got[0])
	}
	for i := range got[1:] {
		got[i+1] = strings.TrimPrefix(got[i+1], "  ")
	}
	if !reflect.DeepEqual(got[1:], want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got[1:], "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadConfigNoEchoes checks that a value that cannot be read is reported once, not again
// by validation of the value left in its place.
func TestLoadConfigNoEchoes(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"c.yaml", "apps: [a]"},
		{"c.yaml", "apps: [{id: [x], key: k, secret: s}]"},
		{"c.yaml", "apps: 3"},
		{"c.yaml", "log: [info]"},
		{"c.yaml", "port: '6001'"},
		{"c.toml", "apps = [1]"},
		{"c.toml", "port = 1.5"},
		{"c.yaml", "cluster: {heartbeat: soon, node_timeout: 5s}"}, // not compared with the default heartbeat
	} {
		_, err := load(t, []string{"--config", writeFile(t, tc.name, tc.content+"\n")}, nil)
		if err == nil {
			t.Errorf("%s: no error", tc.content)
			continue
		}
		if n := strings.Count(err.Error(), "\n"); n != 1 {
			t.Errorf("%s: %d problems, want 1:\n%v", tc.content, n, err)
		}
	}
}

func TestLoadConfigFlagErrors(t *testing.T) {
	var out strings.Builder
	_, err := loadTo([]string{"-h"}, func(string) string { return "" }, &out, testChecks())
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: error = %v, want flag.ErrHelp", err)
	}
	for _, s := range settings {
		if !strings.Contains(out.String(), "--"+s.flag()) || !strings.Contains(out.String(), "$"+s.env()) {
			t.Errorf("usage lacks --%s or $%s:\n%s", s.flag(), s.env(), out.String())
		}
	}
	if _, err := load(t, []string{"--prot", "1"}, nil); err == nil || !strings.Contains(err.Error(), "prot") {
		t.Errorf("unknown flag: error = %v", err)
	}
	if _, err := load(t, []string{"extra"}, nil); err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Errorf("positional argument: error = %v", err)
	}
}

func TestUsedDefaultApp(t *testing.T) {
	copied := writeFile(t, "herald.yaml", "apps: [{id: x, key: app-key, secret: app-secret}]\n")
	c, err := load(t, []string{"--config", copied}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.UsedDefaultApp() {
		t.Error("UsedDefaultApp() = false for an app with the development key and secret")
	}
}

// TestSchemaCoversEveryField fails when a field is added to Config, AppConfig or herald.Limits
// without a key to set it.
func TestSchemaCoversEveryField(t *testing.T) {
	var c Config
	seen := map[any]bool{}
	for _, s := range settings {
		seen[s.ref(&c)] = true
	}
	// Every Config field but the groups and the lists (Apps, Ingest) is one setting; each
	// group's fields are, but app_store.history's (a list, appstore_history.go).
	groups := []any{c.Log, c.Memory, c.Cache, c.History, c.Publish, c.Metrics, c.Pprof, c.Cluster, c.Console, c.Shutdown, c.Webhooks, c.AppStore, c.TLS,
		c.AppStore.Postgres, c.AppStore.MySQL, c.TLS.ACME}
	// The last three are groups inside groups: fields of app_store and tls (counted in their
	// fields, not Config's).
	const nested = 3
	want := reflect.TypeOf(c).NumField() - (len(groups) - nested) - 2 - nested - 1
	for _, g := range groups {
		want += reflect.TypeOf(g).NumField()
	}
	if len(seen) != want {
		t.Errorf("settings set %d distinct fields, Config has %d", len(seen), want)
	}
	var a AppConfig
	clear(seen)
	for _, f := range appFields {
		seen[f.ref(&a)] = true
	}
	if want := reflect.TypeOf(a).NumField() - 3; len(seen) != want {
		t.Errorf("appFields set %d distinct fields, AppConfig has %d besides Limits, Webhooks and History", len(seen), want)
	}
	clear(seen)
	for _, f := range limitFields {
		seen[f.ref(&a.Limits)] = true
	}
	if want := reflect.TypeOf(a.Limits).NumField(); len(seen) != want {
		t.Errorf("limitFields set %d distinct fields, herald.Limits has %d", len(seen), want)
	}
}

func TestHeraldApps(t *testing.T) {
	got := fullWant.HeraldApps()
	want := []herald.App{
		{ID: "1001", Key: "key-one", Secret: "secret-one", EnableClientMessages: true,
			AllowedOrigins: []string{"https://app.example.com", "*.example.org"},
			Limits:         herald.Limits{MaxPresenceMembers: 200, MaxChannelsPerConn: 50, MaxClientEventsPerSecond: 20, MaxAPIRequestsPerSecond: 500}},
		{ID: "1002", Key: "key-two", Secret: "secret-two", EnableUserAuthentication: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got %+v\nwant %+v", got, want)
	}
}

// TestDocs keeps docs/configuration.md in step with the code: it names every key, variable
// and flag, and its YAML and TOML examples load to the same configuration.
func TestDocs(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var names []string
	for _, s := range settings {
		names = append(names, s.key, s.env(), "--"+s.flag())
	}
	for _, f := range appFields {
		names = append(names, f.key)
	}
	for _, f := range appFields[:appCredentials] {
		names = append(names, f.env(), "--"+f.flag())
	}
	for _, f := range limitFields {
		names = append(names, f.key)
	}
	for _, n := range append(names, "HERALD_CONFIG", "--config", storeHistoryKey, storeHistoryEnv, "--"+storeHistoryFlag) {
		if !strings.Contains(doc, "`"+n+"`") {
			t.Errorf("docs/configuration.md does not mention `%s`", n)
		}
	}

	var configs []Config
	for _, lang := range []string{"yaml", "toml"} {
		parts := strings.Split(doc, "```"+lang+"\n")
		if len(parts) < 2 {
			t.Fatalf("no %s example", lang)
		}
		for i, p := range parts[1:] {
			block, _, _ := strings.Cut(p, "```")
			c, err := load(t, []string{"--config", writeFile(t, "example."+lang, block)}, nil)
			if err != nil {
				t.Fatalf("%s example %d: %v", lang, i+1, err)
			}
			if i == 0 {
				configs = append(configs, c)
			}
		}
	}
	if !reflect.DeepEqual(configs[0], configs[1]) {
		t.Errorf("the first YAML and TOML examples differ:\n%+v\n%+v", configs[0], configs[1])
	}
}

func FuzzLoadConfigYAML(f *testing.F) {
	f.Add([]byte(fullYAML))
	f.Add([]byte("port: 70000\napps: [{id: a, key: a, secret: a}, {id: a, key: a, secret: a}]\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("log: &l {level: info}\nx: *l\n"))
	f.Add([]byte("shutdown_timeout: 9999999999999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := writeFile(t, "fuzz.yaml", string(data))
		c, err := load(t, []string{"--config", path}, nil)
		if err == nil && (len(c.Apps) == 0 || c.Port < 1 || c.Port > 65535) {
			t.Fatalf("invalid config accepted: %+v", c)
		}
	})
}

func FuzzLoadConfigTOML(f *testing.F) {
	f.Add([]byte(fullTOML))
	f.Add([]byte("port = 70000\n[[apps]]\nid = 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := writeFile(t, "fuzz.toml", string(data))
		c, err := load(t, []string{"--config", path}, nil)
		if err == nil && (len(c.Apps) == 0 || c.Port < 1 || c.Port > 65535) {
			t.Fatalf("invalid config accepted: %+v", c)
		}
	})
}

// historyWith is history.* at its defaults but max_bytes_per_app.
func historyWith(maxBytesPerApp int) HistoryConfig {
	return HistoryConfig{MaxBytesPerApp: maxBytesPerApp, ReplayBytesPerSecond: 256 << 20, ReplayBytesPerSecondPerApp: 128 << 20,
		ReplayBytesPerSecondPerAddress: 32 << 20, ReplayBytesPerSecondPerConnection: 8 << 20, Linger: secs(60)}
}
