package ssetest

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
)

// Event is one server-sent event.
type Event struct {
	Name, Data string
}

// Stream is an open event stream.
type Stream struct {
	// Events are the stream's events in order; closed when the stream ends.
	Events <-chan Event
	// Done is closed once the stream's reader has returned.
	Done   <-chan struct{}
	cancel context.CancelFunc
}

// Open GETs url with the bearer token and reads its events until the stream ends, Close or
// the test's cleanup. It fails the test unless the answer is a 200 text/event-stream.
func Open(t testing.TB, url, token string) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("event stream %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		cancel()
		t.Fatalf("event stream %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events, done := make(chan Event, 1024), make(chan struct{})
	s := &Stream{Events: events, Done: done, cancel: cancel}
	go func() {
		defer close(done)
		defer close(events)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var ev Event
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev.Name != "" {
					events <- ev
				}
				ev = Event{}
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[len("data: "):]
			}
		}
	}()
	t.Cleanup(s.Close)
	return s
}

// Close ends the stream and waits for its reader to return. It may be called more than once.
func (s *Stream) Close() {
	s.cancel()
	<-s.Done
}
