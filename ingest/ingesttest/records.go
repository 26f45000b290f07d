package ingesttest

import (
	"fmt"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ingest"
)

// The suite's records are JSON objects {"ch": channel, "seq": number}; its pipeline turns
// each into the event "e" on channel ch with data seq, so CheckOrder reads each channel's
// order back from the server.
const (
	channelTemplate = "{value.ch}"
	eventTemplate   = "e"
	dataTemplate    = "{value.seq}"
)

// rec is a record of the suite for channel ch.
func rec(ch string, seq int) string { return fmt.Sprintf(`{"ch":%q,"seq":%d}`, ch, seq) }

// recs returns the records of ch numbered from to to-1.
func recs(ch string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, rec(ch, i))
	}
	return out
}

// on returns the events of evs on channel ch.
func on(evs []herald.Event, ch string) []herald.Event {
	var out []herald.Event
	for _, ev := range evs {
		if ev.Channel == ch {
			out = append(out, ev)
		}
	}
	return out
}

// pipeline is the suite's pipeline of h's kind into pub.
func (h *Harness) pipeline(t testing.TB, pub ingest.Publisher) *ingest.Pipeline {
	t.Helper()
	return Pipeline(t, h.Kind, channelTemplate, eventTemplate, dataTemplate, pub)
}
