package cluster

import (
	"bytes"
	"context"
	"time"

	"github.com/herald-rt/herald"
)

// A store may go back within an epoch: a power cut takes back what Redis (appendfsync
// everysec) or JetStream (sync_interval) acknowledged and had not synced, and keeps the
// channel's epoch. Its next publishes are then given offsets that the nodes already
// delivered for the lost events. A node finds it out when the store's last offset is below
// its copy's (check, repair), or when the store or the bus has another event than its copy
// at an offset it holds (sequenceLocked, check, repair). It then ends the epoch: it closes
// the channel's subscribers here (Listener.Lost), asks the store to start a new epoch in
// place of that one (restarter: a compare-and-set on the old epoch, so that nodes finding
// it at once agree on one new epoch), drops the bus's later events of the old epoch, and
// goes on in the new one. Every node and every recovering client then sees an epoch change:
// a position of the old epoch recovers nothing (epoch_changed), and no position is given to
// two events.

// restarter is a bus store that can end a channel's epoch: broker/redis's and
// broker/nats's Histories.
type restarter interface {
	// Restart ends (app, channel)'s epoch when it is still epoch: the channel's history
	// restarts empty, in a new epoch. It returns the channel's position then (the new
	// epoch's, or, when the epoch was not epoch any more, the one it had).
	Restart(ctx context.Context, rule herald.HistoryRule, app, channel, epoch string) (herald.Position, error)
}

// newEpochLocked moves ch's copy to epoch, which the bus or the store brought: the old one's
// events are dropped from now on, and its subscribers here, who may hold positions of it,
// are closed so that they recover and are told.
func (r *Replicated) newEpochLocked(a *App, ch *Channel, epoch string) {
	h := ch.hist
	if h.last > 0 {
		r.histStats.EpochsLost.Add(1)
		r.l.Lost(a.id, ch)
	}
	if h.epoch != "" {
		h.ended = h.epoch // an epoch never comes back: its late events are stale
	}
	h.clearLocked()
	h.epoch, h.last, h.hole = epoch, 0, 0
}

// forkedLocked reports whether ch's copy holds an event at offset off with another frame
// than frame: the store went back and gave that offset again.
func (r *Replicated) forkedLocked(h *chanHist, off uint64, frame []byte) bool {
	first := h.firstLocked()
	if off < first || off > h.last {
		return false
	}
	return !bytes.Equal(h.ents[h.head+int(off-first)].event(), frame)
}

// rollbackLocked ends ch's epoch, which the store went back in: it closes its subscribers
// here, empties the copy (recoveries from a position of the old epoch answer
// epoch_changed), holds the bus's events back and asks the store for a new epoch (restart).
func (r *Replicated) rollbackLocked(a *App, ch *Channel, why string) {
	h := ch.hist
	old, last := h.epoch, h.last
	r.histStats.Rollbacks.Add(1)
	r.log.Warn("cluster: a history channel's store went back in its epoch (it lost events it had acknowledged): ending the epoch, and closing its subscribers here",
		"app_id", a.id, "channel", h.name, "epoch", old, "offset", last, "why", why)
	r.l.Lost(a.id, ch)
	h.clearLocked()
	h.ended, h.epoch, h.last, h.hole = old, "", 0, 0
	h.busy, h.restarting = true, true
	r.restart(a, ch, old)
}

// restart asks the store to end ch's epoch old, tried again until it answers, then moves the
// copy to the channel's epoch then and sequences the events held back meanwhile (those of
// old are dropped).
func (r *Replicated) restart(a *App, ch *Channel, old string) {
	h := ch.hist
	rs, _ := r.hist.(restarter)
	r.ops.run(func(ctx context.Context) {
		var now herald.Position
		for n := 0; ; n++ {
			var err error
			if rs != nil {
				now, err = rs.Restart(ctx, h.rule, a.id, h.name, old)
			} else {
				var page herald.HistoryPage
				page, err = r.hist.Read(ctx, h.rule, a.id, h.name, 0, 0)
				now = page.Latest
			}
			if err == nil {
				break
			}
			h.mu.Lock()
			dead := h.dead
			h.mu.Unlock()
			if dead {
				return
			}
			select {
			case <-time.After(retry.Wait(n)):
			case <-ctx.Done():
				return
			}
		}
		h.mu.Lock()
		if h.dead {
			h.mu.Unlock()
			return
		}
		h.restarting = false
		if now.Epoch == old {
			// A store that cannot end an epoch: the copy goes on in it after what the
			// store has, and a recovery from before that fails (ReasonLost).
			h.ended = ""
			h.epoch, h.last, h.hole = old, now.Offset, now.Offset
		} else {
			h.epoch = now.Epoch // from its first event: the held ones, or read (repair)
		}
		victims := r.releaseHeldLocked(a, ch)
		h.mu.Unlock()
		a.hist.drop(victims)
	})
}

// wentBackLocked reports whether page, a read of ch's history in its copy's epoch from the
// offset before the copy's last (when the copy holds it), shows the store gone back: its
// last offset below the copy's, or another event than the copy's at the copy's last.
func (r *Replicated) wentBackLocked(h *chanHist, page herald.HistoryPage) bool {
	if h.epoch == "" || page.Latest.Epoch != h.epoch {
		return false
	}
	if page.Latest.Offset < h.last {
		return true
	}
	return len(page.Entries) > 0 && page.Entries[0].Offset == h.last && r.forkedLocked(h, h.last, page.Entries[0].Frame)
}

// compareFrom is where a read of ch's history starts that also returns the copy's last event,
// to compare (wentBackLocked): the offset before it, when the copy holds it.
func compareFrom(h *chanHist) uint64 {
	if h.last > 0 && h.firstLocked() <= h.last {
		return h.last - 1
	}
	return h.last
}
