package config

import "time"

// Checks are the validations of configuration values that only the packages that use them
// can make: a DSN's or a template's syntax, a TLS file's content, a webhook URL. Validation
// calls them and reports each error under its field; cmd/herald hands in the runtime
// packages' own, so that configuration imports none of them.
type Checks struct {
	TLSFiles      func(ca, cert, key string) error                           // the files load as a TLS configuration
	BusPrefix     func(prefix string) bool                                   // cluster.prefix is a valid bus prefix
	MySQLDSN      func(dsn string) error                                     // a MySQL DSN herald can use
	TableName     func(postgres bool, name string) bool                      // a plain table name for the database
	Origins       func(origins []string) error                               // allowed_origins parse
	Template      func(v string) (literal string, isLiteral bool, err error) // an ingest template
	AllowsChannel func(allow []string, channel string) bool                  // an ingest source may publish to channel
	ChannelName   func(name string, max int) error                           // a valid channel name
	EventName     func(name string, max int) error                           // a valid event name
	WebhookURL    func(url string) error
	WebhookEvent  func(eventType string) error
	WebhookHeader func(name, value string) error
	// BusURL reads a cluster.url (or a Redis source's url) as the engines do: its engine,
	// "nats" or "redis", and whether it is TLS.
	BusURL func(raw string) (engine string, tls bool, err error)
}

// Values configuration shares with the runtime packages; cmd/herald's checks_test.go holds
// them equal.
const (
	MinSecretBytes       = 32              // broker.MinSecretBytes
	DefaultClockSkew     = time.Minute     // broker.DefaultMaxSkew
	NATSPingInterval     = 3 * time.Second // nats.PingInterval
	NATSPingsOutstanding = 3               // nats.MaxPingsOutstanding
	MaxHistoryReplicas   = 5               // nats.MaxHistoryReplicas
	DefaultMaxKeys       = 1 << 20         // cluster.DefaultMaxKeys
)

// NodeIDChars are the characters of a node id.
const NodeIDChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

// MaxNodeID is the longest node id: it travels in every bus message.
const MaxNodeID = 64
