package cluster

import (
	"context"
	"time"
)

// A cluster node's history channel lingers after its last local subscriber leaves
// (Config.HistoryLinger): it stays in its app's table without subscription, its copy of the
// history kept up to date by the bus, its interest on the bus held. A subscription meanwhile
// revives it as it was (no interest to take, no history to load), so a client that
// subscribes and unsubscribes in a loop costs the bus's store one load per linger, not one
// per subscription. It is forgotten once it has lingered for HistoryLinger.

// expireLingering forgets, about every quarter of the linger, the channels that have
// lingered for it, until the node stops.
func (r *Replicated) expireLingering(ctx context.Context) {
	every := min(max(r.cfg.HistoryLinger/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			now := r.eng.Now()
			r.eachApp(func(_ string, a *App) {
				if a.table.linger == 0 {
					return
				}
				for _, ch := range a.table.expired(now) {
					r.drop(a, ch)
				}
			})
		case <-ctx.Done():
			return
		}
	}
}

// Lingering is how many history channels of the app linger without subscription here.
func (a *App) Lingering() int { return a.table.lingering() }
