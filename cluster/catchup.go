package cluster

import (
	"context"
	"time"

	"github.com/herald-rt/herald"
)

// CatchUpFor is how long, by default (Config.CatchUpWait), a recovering subscription waits
// for its node's copy of the channel's history to reach the client's position
// (Replicated.CatchUp); then its client is sent to try again.
const CatchUpFor = 30 * time.Second

// CatchUp implements State: while ch's copy is behind since, it reads the store's latest
// position, repairs the copy from the store when the store has more (as check does), and
// calls enter once the copy has reached since, the store shows it will not (its history ends
// before since, or is another epoch), or the copy is dropped: caughtUp true. The store may be
// out of reach meanwhile (the node cut off from its bus): it tries again, with the bus's
// retry pauses. A copy whose store cannot be read at all (unavailable) is waited for too,
// moved on by the bus's events alone: answered before, the client would take the copy's
// older position and be given again the events it had. When Config.CatchUpWait passes (or
// the node stops) first, caughtUp is false: the subscription must not be answered, but sent
// to try again (the session closes its connection, and the client recovers later, here or
// on another node); except from an unavailable copy that has had no event in all that time,
// whose channel is quiet: it is answered as it stands (Recovery.Unknown).
func (r *Replicated) CatchUp(a *App, ch *Channel, since *herald.Position, enter func(caughtUp bool)) bool {
	h := ch.hist
	if h == nil || since == nil || since.Epoch == "" || r.hist == nil {
		return false
	}
	h.mu.Lock()
	behind := !h.dead && since.Offset > h.last && (since.Epoch == h.epoch || h.unavailable && h.epoch == "")
	h.mu.Unlock()
	if !behind {
		return false
	}
	r.histStats.CatchUps.Add(1)
	r.ops.run(func(ctx context.Context) {
		caughtUp := false // the copy reached since, or it never will: the store says so
		defer func() { enter(caughtUp) }()
		deadline := time.Now().Add(r.cfg.CatchUpWait)
		for n := 0; time.Now().Before(deadline); n++ {
			h.mu.Lock()
			done := h.dead || h.epoch == since.Epoch && h.last >= since.Offset
			if h.unavailable {
				// The store cannot be read: only the bus's events move the copy on. Until
				// it has an epoch it cannot tell whether the client is ahead.
				done = done || h.epoch != "" && h.epoch != since.Epoch
			} else {
				done = done || h.epoch != since.Epoch
			}
			after, busy, unavailable := h.last, h.busy, h.unavailable
			h.mu.Unlock()
			if done {
				caughtUp = true
				return
			}
			if unavailable {
				select {
				case <-time.After(50 * time.Millisecond):
				case <-ctx.Done():
					return
				}
				continue
			}
			page, err := r.hist.Read(ctx, h.rule, a.id, h.name, after, 1)
			if err == nil && (page.Latest.Epoch != since.Epoch || page.Latest.Offset < since.Offset) {
				caughtUp = true // the store does not have the client's position: answered as it stands
				return
			}
			if err == nil && !busy && page.Latest.Offset > after {
				h.mu.Lock()
				if !h.busy && !h.dead && h.last == after {
					h.busy = true
					h.held = append(h.held, heldEvent{msg: herald.BusMessage{Epoch: page.Latest.Epoch, Offset: page.Latest.Offset + 1}, probe: true})
					r.repair(a, ch)
				}
				h.mu.Unlock()
			}
			select {
			case <-time.After(min(retry.Wait(n), 200*time.Millisecond)):
			case <-ctx.Done():
				return
			}
		}
		// An unavailable copy that has had no event in all that time: the channel is
		// quiet, no event before the client's position is on its way. The client is
		// answered unavailable with its own position, which it keeps (Recovery.Unknown).
		h.mu.Lock()
		caughtUp = h.unavailable && h.epoch == ""
		h.mu.Unlock()
	})
	return true
}
