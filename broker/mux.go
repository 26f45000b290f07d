package broker

import (
	"sync"
	"sync/atomic"

	"github.com/herald-rt/herald"
)

// Mux routes what a node receives from the bus by kind: its Receive is the herald.BusHandler
// an engine is built with, and it hands each message to the handler registered for the
// message's kind (the cluster layer's kinds to the node's cluster.Replicated, the console's to the console). Messages of a
// kind nobody handles are dropped and counted (Unhandled): nodes of other versions may send
// kinds this one does not know, or that a part it does not run (a console) handles.
//
// Handle may be called at any time, before or while the engine delivers; Receive takes no
// lock and does not allocate (it loads a table indexed by kind, copied on each Handle). The
// zero value handles nothing and is ready to use. Safe for concurrent use.
type Mux struct {
	mu        sync.Mutex // serializes Handle's copy of the table
	table     atomic.Pointer[muxTable]
	unhandled atomic.Uint64
}

// muxTable is a Mux's handlers by kind; never changed once stored.
type muxTable [256]herald.BusHandler

// Handle registers h for the messages of kind, in place of the handler registered before
// (if any); a nil h removes it. A Receive running meanwhile may still call the previous one.
func (m *Mux) Handle(kind herald.BusKind, h herald.BusHandler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t muxTable // 2 KiB, copied per Handle: a node registers a handful at start
	if old := m.table.Load(); old != nil {
		t = *old
	}
	t[kind] = h
	m.table.Store(&t)
}

// Receive hands msg to the handler of its kind, or drops and counts it when there is none.
// It is the herald.BusHandler to build an engine with, called from the engine's delivery
// goroutine.
func (m *Mux) Receive(msg herald.BusMessage) {
	if t := m.table.Load(); t != nil {
		if h := t[msg.Kind]; h != nil {
			h(msg)
			return
		}
	}
	if msg.Kind != herald.BusDrained { // a signal, for whoever wants it
		m.unhandled.Add(1)
	}
}

// Unhandled is how many messages Receive dropped because no handler had their kind.
func (m *Mux) Unhandled() uint64 { return m.unhandled.Load() }
