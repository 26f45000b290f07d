package cluster

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

// A cluster node keeps a copy of the history of each history channel it has local
// subscribers to: loaded from the bus's store (herald.History) before the channel's gate
// opens, then extended, in offset order, by the events the bus brings. So every subscription
// recovers from the copy, under the channel's history lock, and gets each event once. An
// event whose offset is past the next one expected (the bus lost or reordered a message)
// is held back with those that follow until the missing ones are read from the store; when
// they are gone from it, the channel's subscribers here are closed (Listener.Lost) so that
// their clients reconnect and recover, or learn that they cannot.

// maxHeld bounds the events a channel holds back while its missing ones are read; later
// ones are dropped, and read from the store in their turn.
const maxHeld = 4096

// heldEvent is an event held back behind a gap.
type heldEvent struct {
	msg herald.BusMessage
	// probe stands for events the store has that the bus has not brought (check): it is
	// never delivered itself.
	probe bool
}

// HistoryStats count what a cluster node's copies of histories met.
type HistoryStats struct {
	Loads        atomic.Int64 // copies of a channel's history read whole from the store
	GapsRepaired atomic.Int64 // gaps whose events were read from the store and delivered
	GapsLost     atomic.Int64 // gaps whose events were gone: the channel's subscribers were closed
	Duplicates   atomic.Int64 // events received twice, dropped
	// EpochsLost counts the new epochs a copy took from the bus or the store while its
	// subscribers here had positions of the old one: they were closed (Listener.Lost).
	EpochsLost atomic.Int64
	// Rollbacks counts the times this node found the store gone back within an epoch (it
	// lost events it had acknowledged, as in a power cut) and ended that epoch (history_rollback.go).
	Rollbacks atomic.Int64
	// Missed counts the channels without history whose events this node dropped from the
	// bus (it could not keep up): their subscribers here were closed (Listener.Missed).
	Missed atomic.Int64
	// CatchUps counts the recovering subscriptions that waited for this node's copy to
	// reach the client's position (Replicated.CatchUp).
	CatchUps atomic.Int64
}

// receiveHistory puts an event of a history channel in its place in the channel's copy.
func (r *Replicated) receiveHistory(a *App, msg herald.BusMessage) {
	ch := a.table.lookup(msg.Channel)
	if ch == nil {
		return
	}
	if ch.hist == nil {
		// Not a history channel here (the nodes' rules differ): delivered as it comes.
		r.deliver(a, msg.Channel, false, msg.Payload, r.eng.Local(msg.ExcludeSocket), nil, msg.Origin)
		return
	}
	h := ch.hist
	h.mu.Lock()
	if h.dead {
		h.mu.Unlock()
		return
	}
	var victims []*histEntry
	if h.unavailable {
		victims = r.passLocked(a, ch, msg)
	} else if h.busy {
		if len(h.held) < maxHeld {
			h.held = append(h.held, heldEvent{msg: msg})
		}
	} else {
		victims = r.sequenceLocked(a, ch, msg)
	}
	h.mu.Unlock()
	a.hist.drop(victims)
}

// sequenceLocked delivers msg if it is the next event, drops it if it was delivered, and
// otherwise holds it and starts reading the missing events.
func (r *Replicated) sequenceLocked(a *App, ch *Channel, msg herald.BusMessage) (victims []*histEntry) {
	h := ch.hist
	if h.ended != "" && msg.Epoch == h.ended {
		r.histStats.Duplicates.Add(1) // of an epoch this node ended: the store went back in it
		return nil
	}
	if msg.Epoch != h.epoch {
		// A new history (the store lost the old one): its offsets count from 1 again. The
		// subscribers here that had positions of the old one are closed, as for a gap, so
		// that they recover and are told (epoch_changed) what they missed.
		r.newEpochLocked(a, ch, msg.Epoch)
	}
	switch {
	case msg.Offset <= h.last:
		if r.forkedLocked(h, msg.Offset, msg.Payload) {
			// Another event at an offset delivered here: the store went back.
			r.rollbackLocked(a, ch, "an event came at an offset already delivered with another")
			return nil
		}
		r.histStats.Duplicates.Add(1)
	case msg.Offset == h.last+1:
		victims = r.keepCopyLocked(a, ch, msg.Offset, r.eng.Now(), msg.Payload, r.eng.Local(msg.ExcludeSocket), msg.Origin)
	default:
		h.busy = true
		h.held = append(h.held, heldEvent{msg: msg})
		r.repair(a, ch)
	}
	return victims
}

// keepCopyLocked keeps an event in ch's copy and delivers it with its position frame.
func (r *Replicated) keepCopyLocked(a *App, ch *Channel, off uint64, at int64, frame []byte, excl uint64, origin int64) []*histEntry {
	h := ch.hist
	e, victims := h.appendLocked(r.l, off, at, frame)
	r.eng.Dispatch(&ch.Channel, e.buf, excl, nil, a.group.Measure(origin))
	return victims
}

// load reads ch's history into its copy, once the node's interest in it is on the bus, then
// delivers what arrived meanwhile and calls open (the channel's gate). While the store cannot
// be read, it retries until the channel is released or the node stops; after the first
// failure it calls open all the same, with the copy unavailable: subscriptions are not held
// back, recoveries answer unavailable, and events are delivered as they come, unsequenced,
// until a read succeeds.
func (r *Replicated) load(ctx context.Context, a *App, ch *Channel, open func()) {
	h := ch.hist
	opened := false
	for n := 0; ; n++ {
		page, full, lost, err := r.read(ctx, h.rule, a.id, h.name, 0, h.rule.Size)
		if err == nil && full && page.Through < page.Latest.Offset {
			// The store keeps more than the rule's size (the rule changed): its newest.
			page, full, lost, err = r.read(ctx, h.rule, a.id, h.name, page.Latest.Offset-uint64(h.rule.Size), h.rule.Size)
		}
		h.mu.Lock()
		if h.dead {
			h.mu.Unlock()
			return
		}
		if err != nil && !opened {
			h.unavailable = true
			var victims []*histEntry
			for _, ev := range h.held {
				if !ev.probe {
					victims = append(victims, r.passLocked(a, ch, ev.msg)...)
				}
			}
			h.held, h.busy = nil, false
			h.mu.Unlock()
			a.hist.drop(victims)
			r.log.Warn("cluster: a history channel's history cannot be read: serving its subscribers without recovery until it can",
				"app_id", a.id, "channel", h.name, "err", err)
			open()
			opened = true
		} else if err == nil {
			passed, again := r.passedLocked(a, ch, page)
			if again {
				h.mu.Unlock()
				select {
				case <-time.After(retry.Wait(0)):
					continue
				case <-ctx.Done():
					return
				}
			}
			h.unavailable = false
			victims := r.fillLocked(h, page, full, lost)
			for i, e := range passed {
				if i == 0 && h.last+1 != e.offset {
					// The page stops short of them (a read cut at the rule's size).
					h.clearLocked()
					h.last, h.hole = e.offset-1, e.offset-1
				}
				_, v := h.appendLocked(r.l, e.offset, e.at, e.event())
				victims = append(victims, v...)
			}
			victims = append(victims, r.releaseHeldLocked(a, ch)...)
			h.mu.Unlock()
			a.hist.drop(victims)
			r.histStats.Loads.Add(1)
			if !opened {
				open()
			}
			return
		} else {
			h.mu.Unlock()
		}
		select {
		case <-time.After(retry.Wait(n)):
		case <-ctx.Done():
			return
		}
	}
}

// passedLocked returns, when ch's copy was unavailable, the events it delivered that page, a
// read of the store made meanwhile, does not have yet (they reached the bus while the read
// was on its way): the copy keeps them after the page's, so that it neither delivers them
// again nor goes back to an older position. again: the read is older than the first event
// the copy has, with events between that neither has: read again. When the store has
// another epoch than the copy's events, the channel's subscribers here, who may hold
// positions of it, are closed so that they recover and are told.
func (r *Replicated) passedLocked(a *App, ch *Channel, page herald.HistoryPage) (passed []*histEntry, again bool) {
	h := ch.hist
	if !h.unavailable || h.epoch == "" || h.last == 0 {
		return nil, false
	}
	if page.Latest.Epoch != h.epoch {
		r.histStats.EpochsLost.Add(1)
		r.l.Lost(a.id, ch)
		return nil, false
	}
	if page.Latest.Offset >= h.last {
		return nil, false
	}
	if h.firstLocked() > page.Latest.Offset+1 {
		return nil, true
	}
	for _, e := range h.ents[h.head:] {
		if e.offset > page.Latest.Offset {
			passed = append(passed, e)
		}
	}
	return passed, false
}

// passLocked delivers an event of an unavailable copy as it comes, and keeps it. The copy
// cannot read the store, so it cannot repair a gap nor check a fork; but it never gives a
// subscriber an event twice nor skips events silently: one it delivered already is dropped,
// and before an event of a new epoch, past a gap or at an offset it delivered with another
// event, the channel's subscribers here are closed (Listener.Lost), so that they recover and
// are told (unavailable, or epoch_changed) that they missed some.
func (r *Replicated) passLocked(a *App, ch *Channel, msg herald.BusMessage) []*histEntry {
	h := ch.hist
	switch {
	case h.ended != "" && msg.Epoch == h.ended:
		r.histStats.Duplicates.Add(1) // of an epoch that ended: stale
		return nil
	case msg.Epoch != h.epoch:
		r.newEpochLocked(a, ch, msg.Epoch)
		h.last = msg.Offset - 1
	case msg.Offset <= h.last && !r.forkedLocked(h, msg.Offset, msg.Payload):
		r.histStats.Duplicates.Add(1)
		return nil
	case msg.Offset != h.last+1:
		// Past a gap, or at an offset delivered with another event (the store went back):
		// the events in between, or the one replaced, are missed here.
		if h.last > 0 {
			r.l.Lost(a.id, ch)
		}
		h.clearLocked()
		h.last, h.hole = msg.Offset-1, msg.Offset-1
	}
	return r.keepCopyLocked(a, ch, msg.Offset, r.eng.Now(), msg.Payload, r.eng.Local(msg.ExcludeSocket), msg.Origin)
}

// fillLocked makes h a copy of page, a read of the store's history from its start (lost:
// the last offset the read refused, full: the store returned as many as asked) without
// delivering anything (nobody is subscribed yet). The copy keeps the events after the last one
// missing: a gap between two stored events, or a refused one, is a hole (h.hole) that no
// recovery from before it replays around.
func (r *Replicated) fillLocked(h *chanHist, page herald.HistoryPage, full bool, lost uint64) (victims []*histEntry) {
	h.clearLocked()
	h.epoch, h.last, h.hole = page.Latest.Epoch, 0, 0
	for i, e := range page.Entries {
		if e.Offset != h.last+1 {
			if i > 0 || lost+1 >= e.Offset {
				h.clearLocked()
				h.hole = e.Offset - 1
			}
			h.last = e.Offset - 1 // before the first: aged out of the store
		}
		_, v := h.appendLocked(r.l, e.Offset, e.At, e.Frame)
		victims = append(victims, v...)
	}
	if lost > h.last {
		h.clearLocked() // the newest were refused
		h.last, h.hole = lost, lost
	}
	if !full {
		// Later events expired (all of them, since the oldest expire first); a read cut
		// short by its limit leaves the rest to the events held back.
		h.last = max(h.last, page.Latest.Offset)
	}
	return victims
}

// releaseHeldLocked sequences the events held back, in the order they came; one past a gap
// holds back the rest again.
func (r *Replicated) releaseHeldLocked(a *App, ch *Channel) (victims []*histEntry) {
	h := ch.hist
	held := h.held
	h.held, h.busy = nil, false
	for i, ev := range held {
		if h.busy {
			h.held = append(h.held, held[i:]...)
			break
		}
		if ev.probe {
			continue
		}
		victims = append(victims, r.sequenceLocked(a, ch, ev.msg)...)
	}
	return victims
}

// repair reads the events missing from ch's copy from the store and delivers them, then the
// events held back; when they are gone from the store, it closes the channel's subscribers
// here and goes on from the events it has.
func (r *Replicated) repair(a *App, ch *Channel) {
	h := ch.hist
	r.ops.run(func(ctx context.Context) {
		for n := 0; ; {
			h.mu.Lock()
			if h.dead || h.restarting || len(h.held) == 0 {
				h.mu.Unlock()
				return
			}
			after, epoch, upto, from := h.last, h.epoch, h.held[len(h.held)-1].msg.Offset, compareFrom(h)
			h.mu.Unlock()
			limit := h.rule.Size
			if upto > after && upto-after < uint64(limit) {
				limit = int(upto - after)
			}
			// From the copy's last event, when it holds it: the store may have gone back.
			page, _, lost, err := r.read(ctx, h.rule, a.id, h.name, from, limit+int(after-from))
			if err != nil {
				select {
				case <-time.After(retry.Wait(n)):
					n++
					continue
				case <-ctx.Done():
					return
				}
			}
			h.mu.Lock()
			if h.dead {
				h.mu.Unlock()
				return
			}
			victims := r.mendLocked(a, ch, page, lost, after, epoch)
			busy := h.busy
			h.mu.Unlock()
			a.hist.drop(victims)
			if !busy {
				return
			}
		}
	})
}

// mendLocked delivers what a read after `after` in epoch found missing (lost: the last offset
// it refused), and then the events held back. Events gone from the store (aged out, lost or
// refused) close the channel's subscribers here (lostLocked).
func (r *Replicated) mendLocked(a *App, ch *Channel, page herald.HistoryPage, lost, after uint64, epoch string) (victims []*histEntry) {
	h := ch.hist
	if h.restarting || h.last != after || h.epoch != epoch {
		return nil // changed meanwhile; read again
	}
	if r.wentBackLocked(h, page) {
		r.rollbackLocked(a, ch, "the store's history is behind this node's copy")
		return nil
	}
	for len(page.Entries) > 0 && page.Entries[0].Offset <= after {
		page.Entries = page.Entries[1:] // the copy's last, read to compare
	}
	gone := false
	switch {
	case page.Latest.Epoch != h.epoch:
		// The store lost the history: whatever was missing is gone with it.
		r.lostLocked(a, ch, 0, false)
		gone = true
		if h.epoch != "" {
			h.ended = h.epoch // an epoch never comes back: its late events are stale
		}
		h.epoch, h.last, h.hole = page.Latest.Epoch, 0, 0
		if len(page.Entries) > 0 {
			h.last = page.Entries[0].Offset - 1
		}
	case len(page.Entries) == 0 && lost <= h.last && page.Latest.Offset > h.last:
		r.lostLocked(a, ch, h.held[0].msg.Offset-1, false) // aged out
		gone = true
	}
	now := r.eng.Now()
	for i, e := range page.Entries {
		if e.Offset <= h.last {
			continue
		}
		if e.Offset > h.last+1 {
			// Aged out before the first, unless refused; between two, lost or refused.
			r.lostLocked(a, ch, e.Offset-1, i > 0 || lost+1 >= e.Offset)
			gone = true
		}
		victims = append(victims, r.keepCopyLocked(a, ch, e.Offset, now, e.Frame, 0, 0)...)
	}
	if lost > h.last {
		r.lostLocked(a, ch, lost, true)
		gone = true
	}
	if gone {
		r.histStats.GapsLost.Add(1)
	} else {
		r.histStats.GapsRepaired.Add(1)
	}
	return append(victims, r.releaseHeldLocked(a, ch)...)
}

// lostLocked closes ch's subscribers here, whose events up to offset upTo are gone, and
// forgets the copy, which goes on after upTo; hole says those events were lost or refused
// rather than aged out, so that a recovery from before them fails with ReasonLost.
func (r *Replicated) lostLocked(a *App, ch *Channel, upTo uint64, hole bool) {
	h := ch.hist
	h.clearLocked()
	h.last, h.hole = upTo, 0
	if hole {
		h.hole = upTo
	}
	r.l.Lost(a.id, ch)
}

// check looks, after the bus lost messages (its Dropped counter moved, or it reconnected),
// for events missing at the end of each history copy: a lost last event leaves no gap for a
// later one to reveal. A copy the store has more events for is repaired.
func (r *Replicated) check(ctx context.Context) {
	var apps []*App
	r.eachApp(func(_ string, a *App) {
		if len(a.hist.rules()) > 0 {
			apps = append(apps, a)
		}
	})
	for _, a := range apps {
		var chans []*Channel
		a.table.each(func(ch *Channel) {
			if ch.hist != nil {
				chans = append(chans, ch)
			}
		})
		for _, ch := range chans {
			h := ch.hist
			h.mu.Lock()
			skip, after, epoch, from := h.busy || h.dead, h.last, h.epoch, compareFrom(h)
			h.mu.Unlock()
			if skip {
				continue
			}
			// From the copy's last event, when it holds it: the store may have gone back.
			page, _, _, err := r.read(ctx, h.rule, a.id, h.name, from, 1)
			if err != nil {
				continue
			}
			h.mu.Lock()
			if !h.busy && !h.dead && h.last == after && h.epoch == epoch && r.wentBackLocked(h, page) {
				r.rollbackLocked(a, ch, "the store's history is behind this node's copy")
				h.mu.Unlock()
				continue
			}
			h.mu.Unlock()
			if page.Latest.Epoch == epoch && page.Latest.Offset <= after {
				continue
			}
			h.mu.Lock()
			if !h.busy && !h.dead && h.last == after && h.epoch == epoch {
				h.busy = true
				h.held = append(h.held, heldEvent{msg: herald.BusMessage{Epoch: page.Latest.Epoch, Offset: page.Latest.Offset + 1}, probe: true})
				r.repair(a, ch)
			}
			h.mu.Unlock()
		}
	}
}
