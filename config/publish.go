package config

import (
	"time"

	"github.com/herald-rt/herald"
)

// PublishConfig is how the node treats publishes: how long idempotency keys are remembered.
type PublishConfig struct {
	// IdempotencyWindow is how long an event's idempotency key is remembered (herald.Event.Key):
	// a retry within it delivers nothing again.
	IdempotencyWindow Duration
	// IdempotencyMaxKeys is how many keys this node remembers at most (cluster.Config.MaxKeys).
	IdempotencyMaxKeys int
}

func defaultPublish() PublishConfig {
	return PublishConfig{IdempotencyWindow: Duration{herald.DefaultKeyWindow}, IdempotencyMaxKeys: DefaultMaxKeys}
}

// publish checks publish.*.
func (l *loader) publish(c *Config) {
	if w := c.Publish.IdempotencyWindow.Duration; w < time.Second || w > 24*time.Hour {
		l.problem("publish.idempotency_window", "%v must be from 1s to 24h", c.Publish.IdempotencyWindow)
	}
	l.atLeast("publish.idempotency_max_keys", c.Publish.IdempotencyMaxKeys, 1024)
}
