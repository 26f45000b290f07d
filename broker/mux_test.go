package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
)

// TestMux: messages reach the handler of their kind, and only it; kinds nobody handles are
// dropped and counted; a later Handle replaces the handler, a nil one removes it.
func TestMux(t *testing.T) {
	var m Mux
	m.Receive(herald.BusMessage{Kind: herald.BusEvent}) // zero value: nothing handled yet
	var events, states, console []herald.BusMessage
	m.Handle(herald.BusEvent, func(msg herald.BusMessage) { events = append(events, msg) })
	m.Handle(herald.BusState, func(msg herald.BusMessage) { states = append(states, msg) })
	m.Handle(32, func(msg herald.BusMessage) { console = append(console, msg) })
	for _, msg := range []herald.BusMessage{
		{Kind: herald.BusEvent, Channel: "a"},
		{Kind: herald.BusState, Channel: "s"},
		{Kind: herald.BusCache, Channel: "nobody's"},
		{Kind: 32, Channel: "c"},
		{Kind: herald.BusEvent, Channel: "b"},
		{Kind: 255, Channel: "nobody's"},
	} {
		m.Receive(msg)
	}
	if len(events) != 2 || events[0].Channel != "a" || events[1].Channel != "b" || len(states) != 1 || states[0].Channel != "s" ||
		len(console) != 1 || console[0].Channel != "c" {
		t.Errorf("events %v, states %v, console %v", events, states, console)
	}
	if n := m.Unhandled(); n != 3 {
		t.Errorf("Unhandled = %d, want 3", n)
	}
	var replaced int
	m.Handle(herald.BusEvent, func(herald.BusMessage) { replaced++ })
	m.Handle(herald.BusState, nil)
	m.Receive(herald.BusMessage{Kind: herald.BusEvent})
	m.Receive(herald.BusMessage{Kind: herald.BusState})
	if replaced != 1 || len(events) != 2 || len(states) != 1 || m.Unhandled() != 4 {
		t.Errorf("after replacing and removing: replaced %d, events %d, states %d, unhandled %d; want 1, 2, 1, 4",
			replaced, len(events), len(states), m.Unhandled())
	}
}

// TestMuxHandleWhileReceiving: handlers registered (and removed) while messages are being
// received; run with -race. Once a handler is registered, the messages received after it
// reach it.
func TestMuxHandleWhileReceiving(t *testing.T) {
	var m Mux
	var got [8]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 { // receivers, as engines' delivery goroutines
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m.Receive(herald.BusMessage{Kind: herald.BusKind(i % 8)})
			}
		}()
	}
	for k := range 8 {
		m.Handle(herald.BusKind(k), func(herald.BusMessage) { got[k].Add(1) })
		m.Handle(herald.BusKind(100+k), func(herald.BusMessage) {})
		m.Handle(herald.BusKind(100+k), nil)
	}
	var before [8]int64
	for k := range got {
		before[k] = got[k].Load()
	}
	poll.Until(t, 10*time.Second, "every kind handled after its Handle", func() (bool, string) {
		var now [8]int64
		for k := range got {
			if now[k] = got[k].Load(); now[k] < before[k]+100 {
				return false, fmt.Sprintf("handled by kind: %v, after registering all: %v", now, before)
			}
		}
		return true, ""
	})
	close(stop)
	wg.Wait()
}

// TestMuxReceiveDoesNotAllocate pins what BenchmarkMux measures.
func TestMuxReceiveDoesNotAllocate(t *testing.T) {
	var m Mux
	m.Handle(herald.BusEvent, func(herald.BusMessage) {})
	msg := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Payload: make([]byte, 100)}
	unknown := herald.BusMessage{Kind: 200}
	if n := testing.AllocsPerRun(1000, func() { m.Receive(msg); m.Receive(unknown) }); n != 0 {
		t.Errorf("Receive allocates %.1f times", n)
	}
}

// BenchmarkMux is the cost the mux adds to each message received from the bus, with the
// handlers a clustered node with a console has.
func BenchmarkMux(b *testing.B) {
	var m Mux
	var n atomic.Int64
	for _, k := range []herald.BusKind{herald.BusEvent, herald.BusState, herald.BusCache, herald.BusTerminate, 32} {
		m.Handle(k, func(herald.BusMessage) { n.Add(1) })
	}
	msg := herald.BusMessage{Kind: herald.BusEvent, App: "app", Channel: "ch", Node: "n1", Payload: make([]byte, 100)}
	b.ReportAllocs()
	for b.Loop() {
		m.Receive(msg)
	}
	if n.Load() == 0 {
		b.Fatal("nothing handled")
	}
}
