// Package lograte keeps a repeated warning to one log line per interval, so that a flood of
// refusals or slow consumers costs a line every few seconds, not one per event. A Limit is
// safe for concurrent use.
package lograte
