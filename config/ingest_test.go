package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

const ingestYAML = `
apps:
  - {id: app-id, key: app-key, secret: s}
ingest:
  - name: trades
    app: app-id
    kafka:
      brokers: [127.0.0.1:9092]
      topics: [trades]
      group: herald-trades
      start: latest
    channel: "{value.symbol}.trade"
    event: trade
    data: "{value}"
    dead_letter: trades-dead
  - name: bids
    app: app-id
    redis:
      url: redis://127.0.0.1:6379/0
      stream: bids
      group: herald-bids
      claim_idle: 5s
    channel: "auction-{value.item_id}"
    event: bid
  - name: raw
    app: app-id
    redis:
      url: redis://127.0.0.1:6379/0
      subscribe: ["bids:*"]
    format: pusher
    allow_channels: ["presence-auction-*", "auction-*"]
`

func TestIngestConfig(t *testing.T) {
	cfg, err := load(t, []string{"--config", writeFile(t, "h.yaml", ingestYAML)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Ingest) != 3 {
		t.Fatalf("%d sources", len(cfg.Ingest))
	}
	k := cfg.Ingest[0]
	if k.Kafka == nil || k.Kafka.Group != "herald-trades" || k.Kafka.Topics[0] != "trades" || k.Channel != "{value.symbol}.trade" || k.DeadLetter != "trades-dead" {
		t.Errorf("kafka source %+v %+v", k, k.Kafka)
	}
	r := cfg.Ingest[1]
	if r.Redis == nil || r.Redis.Stream != "bids" || r.Redis.ClaimIdle.Duration != 5*time.Second {
		t.Errorf("redis source %+v %+v", r, r.Redis)
	}
	if p := cfg.Ingest[2]; p.Format != "pusher" || p.Redis.Subscribe[0] != "bids:*" || len(p.AllowChannels) != 2 {
		t.Errorf("pub/sub source %+v", p)
	}
	// TOML takes the same keys.
	toml := `
[[apps]]
id = "app-id"
key = "k"
secret = "s"
[[ingest]]
name = "t"
app = "app-id"
channel = "{topic}"
event = "e"
[ingest.kafka]
brokers = ["127.0.0.1:9092"]
topics = ["a", "b"]
group = "g"
`
	cfg, err = load(t, []string{"--config", writeFile(t, "h.toml", toml)}, nil)
	if err != nil || len(cfg.Ingest) != 1 || len(cfg.Ingest[0].Kafka.Topics) != 2 {
		t.Fatalf("toml: %v %+v", err, cfg.Ingest)
	}
}

func TestIngestConfigErrors(t *testing.T) {
	bad := `
apps:
  - {id: app-id, key: app-key, secret: s}
ingest:
  - name: trades
    app: nope
    kafka: {brokers: [nohost], topics: [], start: sometime, session_timeout: 1s}
    channel: "{value.symbol.trade"
    event: "{offset}"
  - name: trades
    app: app-id
    channel: "bad channel"
    event: e
  - name: both
    app: app-id
    kafka: {brokers: ["h:1"], topics: [t], group: g}
    redis: {url: "redis://h:1"}
    channel: c
    event: e
  - name: r
    app: app-id
    redis: {url: "http://h:1", stream: s, subscribe: ["x"], claim_idle: 1ms}
    format: pusher
    channel: c
  - name: r2
    app: app-id
    redis: {url: "redis://h:1", stream: s}
    channel: c
    event: e
    colour: red
    dead_letter: s
  - name: p1
    app: app-id
    redis: {url: "redis://h:1", subscribe: [x]}
    channel: private-orders
    event: pusher:error
  - name: p2
    app: app-id
    redis: {url: "redis://h:1", subscribe: [x]}
    channel: presence-room
    event: e
    allow_channels: ["private-*", "", "bad channel*"]
`
	_, err := load(t, []string{"--config", writeFile(t, "h.yaml", bad)}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`ingest[0].app: "nope" is not the id of a configured app`,
		`ingest[0].kafka.brokers[0]: "nohost" is not host:port`,
		`ingest[0].kafka.topics: at least one topic is required`,
		`ingest[0].kafka.group: must not be empty`,
		`ingest[0].kafka.start: "sometime" is not one of earliest, latest`,
		`ingest[0].kafka.session_timeout: 1s must be at least 6s`,
		`ingest[0].channel: '{' at byte 0 is never closed`,
		`ingest[0].event: unknown variable {offset}`,
		`ingest[1].name: duplicate of ingest[0].name`,
		`ingest[1]: needs a kafka or a redis table`,
		`ingest[1].channel: channel name has invalid character ' '`,
		`ingest[2].redis: a source has kafka or redis, not both`,
		`ingest[3].redis.url: want redis://`,
		`ingest[3].redis.subscribe: a source reads a stream or subscribes, not both`,
		`ingest[3].redis.claim_idle: 1ms must be at least 100ms`,
		`ingest[3].channel: not used with format pusher`,
		`ingest[4].redis.group: must not be empty`,
		`ingest[4].colour: unknown key`,
		`ingest[4].dead_letter: "s" is a topic or stream the source reads`,
		`ingest[5].channel: "private-orders" is not a public channel: name it in allow_channels`,
		`ingest[5].event: event name "pusher:error" is reserved`,
		`ingest[6].channel: "presence-room" matches none of allow_channels`,
		`ingest[6].allow_channels[1]: must not be empty`,
		`ingest[6].allow_channels[2]: "bad channel*" holds a character no channel name has`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
}

// TestIngestDocs: docs/configuration.md names every ingest key.
func TestIngestDocs(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ingest", "name", "app", "kafka", "redis", "channel", "event", "data", "format", "dead_letter",
		"brokers", "topics", "group", "start", "session_timeout", "url", "stream", "claim_idle", "subscribe", "allow_channels"} {
		if !strings.Contains(string(b), "`"+k+"`") {
			t.Errorf("docs/configuration.md does not mention `%s`", k)
		}
	}
}

// TestIngestKafkaSecurity: a Kafka source's TLS files and SASL credentials, the password
// from a file, and each mistake named by its key without showing the password.
func TestIngestKafkaSecurity(t *testing.T) {
	pw := writeFile(t, "pw", "s3cret-pw\n")
	good := `
apps:
  - {id: app-id, key: app-key, secret: s}
ingest:
  - name: trades
    app: app-id
    kafka: {brokers: ["127.0.0.1:9093"], topics: [t], group: g, tls: true, sasl_mechanism: SCRAM-SHA-512, sasl_user: herald, sasl_password_file: "` + pw + `"}
    channel: c
    event: e
`
	cfg, err := load(t, []string{"--config", writeFile(t, "h.yaml", good)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k := cfg.Ingest[0].Kafka; !k.TLS || k.SASLMechanism != "SCRAM-SHA-512" || k.SASLUser != "herald" || k.SASLPassword != "s3cret-pw" {
		t.Fatalf("kafka %+v", k)
	}
	bad := `
apps:
  - {id: app-id, key: app-key, secret: s}
ingest:
  - name: a
    app: app-id
    kafka: {brokers: ["h:1"], topics: [t], group: g, sasl_mechanism: GSSAPI, tls_cert_file: "` + pw + `"}
    channel: c
    event: e
  - name: b
    app: app-id
    kafka: {brokers: ["h:1"], topics: [t], group: g, sasl_user: herald, sasl_password: s3cret-pw}
    channel: c
    event: e
  - name: c
    app: app-id
    kafka: {brokers: ["h:1"], topics: [t], group: g, sasl_mechanism: PLAIN, sasl_password: s3cret-pw, sasl_password_file: "` + pw + `"}
    channel: c
    event: e
`
	_, err = load(t, []string{"--config", writeFile(t, "h.yaml", bad)}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`ingest[0].kafka.sasl_mechanism: "GSSAPI": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`,
		`ingest[0].kafka.tls_cert_file: tls client certificate: give its certificate and its key, or neither`,
		`ingest[1].kafka.sasl_mechanism: sasl_user and sasl_password need a mechanism`,
		`ingest[2].kafka.sasl_password_file: set ingest[2].kafka.sasl_password or ingest[2].kafka.sasl_password_file, not both`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the errors show the password:\n%v", err)
	}
}
