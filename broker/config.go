package broker

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/herald-rt/herald"
)

// Common is the configuration every engine that talks to a bus server shares (nats, redis):
// each engine's Config embeds it. Zero values mean the defaults noted.
type Common struct {
	NodeID string // this node's id, unique in the cluster; required
	Prefix string // first token(s) of every bus subject, namespacing clusters on one server; default "herald"

	QueueSize int // received messages queued for the handler; default DefaultQueueSize
	// Timeout bounds each round trip to the bus that has no deadline of its own (connecting,
	// confirming a subscription when its ctx has none, a Redis publish pipeline); default 5s.
	Timeout time.Duration
	// ReconnectWait is the first pause between reconnection attempts; it doubles up to
	// ReconnectMaxWait (defaults 100ms and 1s), with 20% jitter (Backoff). Attempts never stop.
	ReconnectWait, ReconnectMaxWait time.Duration
	// ProbeInterval is how often an idle connection's round trip is measured (RoundTrip
	// observes it; Redis also finds a lost connection so); default 5s.
	ProbeInterval time.Duration
	RoundTrip     herald.BusObserver // nil: round trips are not observed
	// KeyWindow is how long the engine's History remembers an idempotency key
	// (herald.BusMessage.Key); default herald.DefaultKeyWindow.
	KeyWindow time.Duration
	Logger    *slog.Logger // state changes only, never per message; nil: discard

	// TLS, when set, is the client configuration of a TLS connection to the bus server (a
	// CA, a client certificate: TLSFiles.Config); nil: the URL's scheme decides (rediss://
	// and NATS's tls:// verify the server with the system's roots).
	TLS *tls.Config

	// Auth, with a secret, seals every message this node sends and refuses every message
	// it receives that is not sealed with the secret, or was received before (Auth); an
	// engine's History then keeps its events sealed too. Without a secret, messages travel
	// unsealed and whoever can publish on the bus is believed.
	Auth AuthConfig
}

// DefaultQueueSize is how many received messages an engine queues for its handler unless
// configured otherwise; what arrives while they are queued is dropped (and counted).
const DefaultQueueSize = 1 << 16

// WithDefaults returns c with the defaults in place of its zero values.
func (c Common) WithDefaults() Common {
	if c.Prefix == "" {
		c.Prefix = "herald"
	}
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Timeout, 5*time.Second)
	def(&c.ReconnectWait, 100*time.Millisecond)
	def(&c.ReconnectMaxWait, time.Second)
	def(&c.ProbeInterval, 5*time.Second)
	def(&c.KeyWindow, herald.DefaultKeyWindow)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Check returns the error of engine's New (its name starts the message) for a configuration,
// with its defaults in place, that has no URL or node id or a prefix that cannot start a
// subject (ValidPrefix).
func (c Common) Check(engine, url string) error {
	if url == "" || c.NodeID == "" {
		return fmt.Errorf("%s broker: URL and NodeID are required", engine)
	}
	if !ValidPrefix(c.Prefix) {
		return fmt.Errorf("%s broker: prefix %q: want printable ASCII without spaces or wildcards, and no empty token", engine, c.Prefix)
	}
	return nil
}

// NewAuth returns the engine's Auth, nil without a secret; its error is engine's New's.
func (c Common) NewAuth(engine string) (*Auth, error) {
	if !c.Auth.Enabled() {
		return nil, nil
	}
	a, err := NewAuth(c.Auth, c.Prefix, c.NodeID)
	if err != nil {
		return nil, fmt.Errorf("%s broker: %w", engine, err)
	}
	return a, nil
}

// Reconnect is the pause before reconnection attempt n (from 1): Backoff from ReconnectWait
// to ReconnectMaxWait.
func (c Common) Reconnect(n int) time.Duration {
	return Backoff(c.ReconnectWait, c.ReconnectMaxWait, n)
}
