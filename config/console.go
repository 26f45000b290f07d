package config

import "time"

// ConsoleConfig is the console (package console), served at /console on the metrics
// listener. It is off unless Token is set.
type ConsoleConfig struct {
	// Token opens the console: a browser posts it to the login form /console/login once
	// (then holds a session cookie), a tool sends Authorization: Bearer TOKEN. Empty = no
	// console (404).
	Token string
	// SessionLifetime is how long a browser's session lasts after the login form; the server
	// forgets it then, whatever the browser keeps.
	SessionLifetime Duration
	// EventsPerSecond is how many entries of one app's debug log the console keeps a
	// second while a page watches it; the rest are sampled out and counted. 0 = 100.
	EventsPerSecond int
}

// minConsoleToken is the shortest token accepted: the console can publish to every app.
const minConsoleToken = 16

// maxConsoleSession is the longest console.session_lifetime accepted.
const maxConsoleSession = 7 * 24 * time.Hour

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
	if con.SessionLifetime.Duration < time.Minute || con.SessionLifetime.Duration > maxConsoleSession {
		l.problem("console.session_lifetime", "%v must be from 1m to %v", con.SessionLifetime, maxConsoleSession)
	}
	if con.EventsPerSecond < 0 || con.EventsPerSecond > 10_000 {
		l.problem("console.events_per_second", "%d out of range 0..10000", con.EventsPerSecond)
	}
}
