package ingesttest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ingest"
)

// CloseWithin bounds a source's Close in Stop: the machine is shared.
const CloseWithin = 60 * time.Second

// Pipeline returns a pipeline of app "app" into pub whose records become events on the
// channel and named event the templates render, with the data template's text (data "":
// the record's value).
func Pipeline(t testing.TB, kind, channel, event, data string, pub ingest.Publisher) *ingest.Pipeline {
	t.Helper()
	tp := func(s string) *ingest.Template {
		if s == "" {
			return nil
		}
		x, err := ingest.ParseTemplate(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	p, err := ingest.New(ingest.Config{Name: "t", Kind: kind, App: &herald.App{ID: "app"},
		Channel: tp(channel), Event: tp(event), Data: tp(data)}, pub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Stop closes s, failing the test if that takes longer than CloseWithin.
func Stop(t testing.TB, s ingest.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CloseWithin)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// CheckOrder fails unless each channel's events carry increasing numbers as their data, and
// returns how many events each channel got.
func CheckOrder(t testing.TB, evs []herald.Event) map[string]int {
	t.Helper()
	last, n := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		seq, err := strconv.Atoi(ev.Data)
		if err != nil {
			t.Fatalf("event data %q", ev.Data)
		}
		if prev, ok := last[ev.Channel]; ok && seq <= prev {
			t.Fatalf("channel %s: seq %d after %d", ev.Channel, seq, prev)
		}
		last[ev.Channel] = seq
		n[ev.Channel]++
	}
	return n
}

// Dedupe drops repeated events (a redelivery after a lost commit), keeping the first.
func Dedupe(evs []herald.Event) []herald.Event {
	seen := map[string]bool{}
	var out []herald.Event
	for _, ev := range evs {
		if k := ev.Channel + "/" + ev.Data; !seen[k] {
			seen[k] = true
			out = append(out, ev)
		}
	}
	return out
}
