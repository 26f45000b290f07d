package cluster

import (
	"context"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/lograte"
)

// lossReporter is a bus that says whose received messages it dropped: every engine here
// (broker/memory, broker/redis, broker/nats).
type lossReporter interface {
	// Losses calls f with each (app, channel) whose received messages the bus dropped
	// since the last call; false, without calling f, when it could not remember them all.
	Losses(f func(app, channel string)) bool
}

// watchLosses tells whom it concerns, once a second, what the bus lost:
//   - a history channel's copy is checked (check) whenever the bus dropped messages,
//     refused some as replayed, or reconnected after an outage: its gap is repaired from
//     the history, or its subscribers are told (Listener.Lost);
//   - the local subscribers of a channel without history whose events this node dropped
//     (its receive queue full: it could not keep up) are told (Listener.Missed);
//   - the internal keys' messages (the state stream's) travel on a queue of their own: a
//     node shedding events still hears the others' heartbeats. The state stream notices a
//     batch it missed and asks for a snapshot; a dropped cache or control message is logged.
func (r *Replicated) watchLosses(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lr, _ := r.bus.(lossReporter)
	var warn lograte.Limit
	var seen herald.BrokerStats
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if lr != nil {
			r.tellLosses(lr, &warn)
		}
		st := r.bus.Stats()
		// A history event refused as replayed came too late (past the sender's replay
		// window): lost, as a dropped one.
		if st.Dropped != seen.Dropped || st.Reconnects != seen.Reconnects || st.Replayed != seen.Replayed {
			seen = st
			if r.hist != nil {
				r.check(ctx)
			}
		}
	}
}

// tellLosses tells the local subscribers of the channels without history whose events the
// bus dropped; every such channel when the bus could not say which.
func (r *Replicated) tellLosses(lr lossReporter, warn *lograte.Limit) {
	internal := 0
	complete := lr.Losses(func(app, channel string) {
		if app == "" {
			internal++
			return
		}
		if a := r.app(app); a != nil {
			if ch := a.table.lookup(channel); ch != nil && ch.hist == nil {
				r.missed(a, ch)
			}
		}
	})
	if !complete {
		r.eachApp(func(_ string, a *App) {
			a.table.each(func(ch *Channel) {
				if ch.hist == nil {
					r.missed(a, ch)
				}
			})
		})
	}
	if internal > 0 && warn.Due(time.Now().UnixMilli(), time.Minute.Milliseconds()) {
		r.log.Warn("cluster bus: this node dropped internal messages (state, cache or control), its queue full", "keys", internal)
	}
}

// missed tells ch's local subscribers that events of it were dropped here.
func (r *Replicated) missed(a *App, ch *Channel) {
	r.histStats.Missed.Add(1)
	r.l.Missed(a.id, ch)
}
