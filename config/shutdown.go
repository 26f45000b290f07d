package config

import "time"

// ShutdownConfig is how a node leaves on SIGTERM or SIGINT (see drain.go): at once it answers
// /ready with 503 ("draining") while it goes on serving and accepting connections for
// DrainDelay, so that load balancers take it out of rotation; then it closes every connection
// with 4200 and exits within shutdown_timeout. A second signal ends the delay early.
type ShutdownConfig struct {
	// DrainDelay is how long the node keeps accepting after the signal, /ready answering 503;
	// 0 = close the connections at once.
	DrainDelay Duration
}

// defaultShutdown is the shutdown section before any file, environment variable or flag:
// 5 s, a little more than the usual load balancer health check interval (a few seconds) times
// the failures it needs to take a node out.
func defaultShutdown() ShutdownConfig {
	return ShutdownConfig{DrainDelay: Duration{5 * time.Second}}
}

// shutdown checks shutdown.*.
func (l *loader) shutdown(c *ShutdownConfig) {
	if c.DrainDelay.Duration < 0 {
		l.problem("shutdown.drain_delay", "%v must not be negative", c.DrainDelay)
	}
}
