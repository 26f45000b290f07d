package cluster

import (
	"slices"

	"github.com/herald-rt/herald"
)

// rules are the app's history rules now: a slice never modified once stored.
func (s *histStore) rules() []herald.HistoryRule { return *s.ruleset.Load() }

// SetHistoryRules replaces the app's history rules (those AddApp was given): an app store's
// app whose rules changed while the node runs. Every lookup from now on follows the new
// rules: publishes, the REST history endpoint and the channels that open (their first local
// subscription). A channel open now keeps the rule it opened with until its last local
// subscriber leaves, with two exceptions that keep recovery honest:
//
//   - a channel that no rule matches any more keeps no more events, so a recovery on it
//     answers unavailable (nothing missed since can be replayed) until it closes here;
//   - on a single node, whose histories are the channels' own and outlive their
//     subscribers, a history under a rule still takes the new rule's size and TTL at once,
//     in the same epoch; one that had lost its rule and gets one again starts a new epoch
//     (the events published meanwhile were not kept).
//
// Publishes in flight at the moment of the change may follow either the old rules or the
// new ones. Calls with the rules the app has already cost a comparison.
func (a *App) SetHistoryRules(rules []herald.HistoryRule) {
	s := a.hist
	// Serialises the changes, so that the histories end up under the rules stored last;
	// the order is histStore.mu, then a history's lock.
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.rules(), rules) {
		return
	}
	rules = slices.Clone(rules)
	s.ruleset.Store(&rules)
	// After the store: a channel that opens from now on has the new rules, and every
	// channel opened under the old ones is in the table.
	var open []*Channel
	a.table.each(func(ch *Channel) {
		if ch.hasHist {
			open = append(open, ch)
		}
	})
	if a.table.copies {
		a.retireCopies(open)
		return
	}
	a.reruleLocked(open)
}

// retireCopies marks unavailable the copies of the open channels that no rule matches any
// more: a cluster node's events of them come without a position from now on, and are not
// kept. A copy whose channel still has a rule keeps its own until the channel closes here.
func (a *App) retireCopies(open []*Channel) {
	for _, ch := range open {
		if _, ok := a.hist.rule(ch.name); ok || ch.hist == nil {
			continue
		}
		h := ch.hist
		h.mu.Lock()
		if !h.dead {
			h.unavailable = true
			h.clearLocked()
		}
		h.mu.Unlock()
	}
}

// reruleLocked puts a single node's histories under the new rules, s.mu held: each takes its
// channel's new rule (trimmed to its size and TTL now), or, with none, is kept unavailable
// and empty; one unavailable that has a rule again is forgotten, so that the next event
// starts a new epoch. open are the channels open with a history rule: each gets a history
// now if it has none, so that a recovery on it meets the state above rather than a fresh
// history.
func (a *App) reruleLocked(open []*Channel) {
	s := a.hist
	now := a.eng.Now()
	for name, h := range s.m {
		r, ok := s.rule(name)
		h.mu.Lock()
		switch {
		case ok && !h.unavailable:
			h.rule = r
			for len(h.ents)-h.head > r.Size {
				h.dropHeadLocked()
			}
			h.expireLocked(now)
		case ok:
			h.clearLocked()
			h.dead = true
			delete(s.m, name)
		default:
			h.unavailable = true
			h.clearLocked()
		}
		h.mu.Unlock()
	}
	for _, ch := range open {
		if s.m[ch.name] != nil {
			continue
		}
		r, ok := s.rule(ch.name)
		if !ok {
			r = ch.rule
		}
		h := s.newHist(ch.name, r)
		h.used = now
		h.epoch = s.epoch + "." + formatGen(s.gen.Add(1))
		h.unavailable = !ok
		s.m[h.name] = h
	}
}
