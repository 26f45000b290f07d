package main

// ConsoleConfig is the console (package console), served at /console on the metrics
// listener. It is off unless Token is set.
type ConsoleConfig struct {
	// Token opens the console: a browser opens /console?token=TOKEN once (then holds a
	// cookie), a tool sends Authorization: Bearer TOKEN. Empty = no console (404).
	Token string
	// EventsPerSecond is how many entries of one app's debug log the console keeps a
	// second while a page watches it; the rest are sampled out and counted. 0 = 100.
	EventsPerSecond int
}

// minConsoleToken is the shortest token accepted: the console can publish to every app.
const minConsoleToken = 16

// console checks console.*.
func (l *loader) console(c *Config) {
	con := c.Console
	if con.Token != "" {
		if len(con.Token) < minConsoleToken {
			l.problem("console.token", "%d characters, at least %d: the console can publish to every app", len(con.Token), minConsoleToken)
		}
		if !c.Metrics.Enabled {
			l.problem("console.token", "the console is served on the metrics listener: set metrics.enabled true")
		}
	}
	if con.EventsPerSecond < 0 || con.EventsPerSecond > 10_000 {
		l.problem("console.events_per_second", "%d out of range 0..10000", con.EventsPerSecond)
	}
}
