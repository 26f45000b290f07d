package ingesttest

import (
	"sync"

	"github.com/herald-rt/herald"
)

// Sink is the session server as the pipeline sees it: it keeps the events it takes, and refuses them
// (as a server whose queues are full) while told to.
type Sink struct {
	mu     sync.Mutex
	evs    []herald.Event
	refuse bool
}

// Refusing returns a Sink that refuses events until SetRefuse(false).
func Refusing() *Sink { return &Sink{refuse: true} }

// Publish implements ingest.Publisher.
func (s *Sink) Publish(_ string, evs ...herald.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse {
		return herald.Errorf(herald.CodeBusy, "fan-out queues are full, retry later")
	}
	s.evs = append(s.evs, evs...)
	return nil
}

// SetRefuse makes Publish refuse events (true) or take them again (false).
func (s *Sink) SetRefuse(v bool) { s.mu.Lock(); s.refuse = v; s.mu.Unlock() }

// Events returns a copy of the events taken so far, in order.
func (s *Sink) Events() []herald.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]herald.Event(nil), s.evs...)
}
