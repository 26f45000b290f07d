package cluster

import (
	"context"

	"github.com/herald-rt/herald"
)

// History implements State: the bus's store has the channel's events.
func (r *Replicated) History(ctx context.Context, a *App, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	rule, ok := a.hist.rule(channel)
	if !ok || r.hist == nil {
		return herald.HistoryPage{}, herald.Errorf(herald.CodeNotFound, "channel %s keeps no history", channel)
	}
	page, _, _, err := r.read(ctx, rule, a.id, channel, after, limit)
	return page, err
}

// read reads a channel's history from the bus's store, its entries checked as the bus's
// events are (Config.ValidFrame): a refused entry is left out, and lost is the last offset
// refused (0: none). The page's Through is set (herald.HistoryPage); full says the store
// returned limit entries, refused ones included: there may be more.
func (r *Replicated) read(ctx context.Context, rule herald.HistoryRule, app, channel string, after uint64, limit int) (page herald.HistoryPage, full bool, lost uint64, err error) {
	page, err = r.hist.Read(ctx, rule, app, channel, after, limit)
	if err != nil {
		return page, false, 0, err
	}
	full = len(page.Entries) >= limit
	page.Through = page.Latest.Offset
	if full {
		page.Through = page.Entries[len(page.Entries)-1].Offset
	}
	if r.cfg.ValidFrame == nil {
		return page, full, 0, nil
	}
	out := page.Entries[:0]
	for _, e := range page.Entries {
		if !r.cfg.ValidFrame(e.Frame) {
			lost = max(lost, e.Offset)
			continue
		}
		out = append(out, e)
	}
	page.Entries = out
	return page, full, lost, nil
}
