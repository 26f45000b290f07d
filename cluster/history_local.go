package cluster

import (
	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// keep gives an event of a single node's history channel its position, keeps it and delivers
// it, with its position frame, to the channel's local subscribers but excl, all under the
// channel's history lock: a subscriber entered under it (App.Recover) gets each event once,
// replayed or live.
func (n *node) keep(a *App, name string, rule herald.HistoryRule, frame []byte, excl uint64, s *fanout.Slots, m fanout.Measure) {
	now := n.eng.Now()
	h := a.hist.get(name, rule, now)
	off := h.last + 1
	e, victims := h.appendLocked(n.l, off, now, frame)
	if ch := a.table.lookup(name); ch != nil {
		n.eng.Dispatch(&ch.Channel, e.buf, excl, s, m)
	}
	h.mu.Unlock()
	a.hist.drop(victims)
}

// Recover runs f, holding history channel ch's history, with what a subscription
// recovering from since (nil: not recovering) gets, so that a subscriber entered in f gets
// each event once: replayed or live. It reports false, without calling f, for a channel
// without history.
func (a *App) Recover(ch *Channel, since *herald.Position, f func(Recovery)) bool {
	if !ch.hasHist {
		return false
	}
	h := ch.hist
	if h != nil {
		h.mu.Lock()
	} else {
		h = a.hist.get(ch.name, ch.rule, a.eng.Now())
	}
	defer h.mu.Unlock()
	f(h.recoverLocked(since, a.eng.Now()))
	return true
}

// HasHistory reports whether channel name keeps a history.
func (a *App) HasHistory(name string) bool {
	_, ok := a.hist.rule(name)
	return ok
}

// readLocal reads a single node's history of channel name: the events after `after`, at most
// limit of them.
func (a *App) readLocal(name string, after uint64, limit int) herald.HistoryPage {
	h := a.hist.peek(name)
	if h == nil {
		return herald.HistoryPage{}
	}
	defer h.mu.Unlock()
	h.expireLocked(a.eng.Now())
	p := herald.HistoryPage{Latest: herald.Position{Epoch: h.epoch, Offset: h.last}, Through: h.last}
	for _, e := range h.ents[h.head:] {
		if e.offset > after {
			if len(p.Entries) == limit {
				p.Through = p.Entries[limit-1].Offset
				break
			}
			p.Entries = append(p.Entries, herald.HistoryEntry{Offset: e.offset, At: e.at, Frame: e.event()})
		}
	}
	return p
}
