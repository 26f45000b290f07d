package main

import (
	"net"
	"strings"
	"time"
)

// checks are the validations of configuration values that only the packages that use them
// can make: a DSN's or a template's syntax, a TLS file's content, a webhook URL. Validation
// calls them and reports each error under its field; runtimeChecks (checks.go) hands in the
// runtime packages' own, so that configuration imports none of them.
type checks struct {
	tlsFiles      func(ca, cert, key string) error                           // the files load as a TLS configuration
	busPrefix     func(prefix string) bool                                   // cluster.prefix is a valid bus prefix
	mysqlDSN      func(dsn string) error                                     // a MySQL DSN herald can use
	tableName     func(postgres bool, name string) bool                      // a plain table name for the database
	origins       func(origins []string) error                               // allowed_origins parse
	template      func(v string) (literal string, isLiteral bool, err error) // an ingest template
	allowsChannel func(allow []string, channel string) bool                  // an ingest source may publish to channel
	channelName   func(name string, max int) error                           // a valid channel name
	eventName     func(name string, max int) error                           // a valid event name
	webhookURL    func(url string) error
	webhookEvent  func(eventType string) error
	webhookHeader func(name, value string) error
	busURL        func(raw string) (busURL, error) // a cluster.url (or a Redis source's url) the engines read
}

// Values configuration shares with the runtime packages; checks_test.go holds them equal.
const (
	minSecretBytes       = 32              // broker.MinSecretBytes
	defaultClockSkew     = time.Minute     // broker.DefaultMaxSkew
	natsPingInterval     = 3 * time.Second // nats.PingInterval
	natsPingsOutstanding = 3               // nats.MaxPingsOutstanding
	maxHistoryReplicas   = 5               // nats.MaxHistoryReplicas
	defaultMaxKeys       = 1 << 20         // cluster.DefaultMaxKeys
)

// busURL is a checked cluster.url.
type busURL struct {
	engine   string   // "nats" or "redis"
	tls      bool     // rediss://, or a NATS server given as tls://
	redacted string   // the URL with its passwords and tokens replaced by "xxxxx", for logs
	secrets  []string // those passwords and tokens, which no log line may show
	hosts    []string // the servers' host names or addresses
}

// loopback reports whether every server of the bus is on this machine: a loopback address
// or localhost.
func (u busURL) loopback() bool {
	for _, h := range u.hosts {
		if ip := net.ParseIP(h); !(strings.EqualFold(h, "localhost") || ip != nil && ip.IsLoopback()) {
			return false
		}
	}
	return true
}

// nodeIDChars are the characters of a node id.
const nodeIDChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

// maxNodeID is the longest node id: it travels in every bus message.
const maxNodeID = 64
