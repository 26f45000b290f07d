package cluster

import (
	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// App is one app's part of a State: its channels with local subscribers, its presence
// channels' members and its cache channels' last events.
type App struct {
	id     string
	group  *fanout.Group
	table  *table
	cache  *cache
	hist   *histStore
	eng    *fanout.Engine
	others others // its State's: what the other nodes hear of this one
}

// ID is the app's id.
func (a *App) ID() string { return a.id }

// Lookup returns the channel with local subscribers named name, or nil.
func (a *App) Lookup(name string) *Channel { return a.table.lookupLive(name) }

// LocalSubs is this node's subscription count of channel name.
func (a *App) LocalSubs(name string) int { return a.table.localSubs(name) }

// Users lists the members of presence channel name on every node, sorted.
func (a *App) Users(name string) []string { return a.table.pres.lookup(name).users() }

// WithCache runs f under the lock of cache channel name with its last event's frame (nil when
// it has none), so that a subscriber entered in f gets each event once: from the cache or
// live.
func (a *App) WithCache(name string, f func(last []byte)) {
	a.cache.with(name, a.eng.Now(), func(last []byte) []byte {
		f(last)
		return nil
	})
}

// Cached reports whether cache channel name holds an event.
func (a *App) Cached(name string) bool { return a.cache.has(name, a.eng.Now()) }

// Join adds one local connection of member mb to presence channel ch, unless the channel
// has max members and mb is none of them: then it reports false and changes nothing. Under
// the channel's presence lock, so that every member sees joins and leaves in one order, it
// calls f with added (mb was a member on no node: the others must be told) and the members
// after the join; f returns whether it reported the member_added activity.
func (a *App) Join(ch *Channel, mb herald.Member, max int, f func(added bool, members []herald.Member) (reported bool)) bool {
	p := ch.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[mb.UserID]
	known := p.hasLocked(mb.UserID) // a member here or on another node
	if !known && p.countLocked() >= max {
		return false
	}
	first := m == nil
	if first {
		m = &member{info: mb.Info}
		p.members[mb.UserID] = m
		p.ch = ch
	}
	m.conns++
	reported := f(!known, p.snapshotLocked())
	if first {
		a.others.markMember(a.id, ch.name, mb.UserID, reported)
	}
	return true
}

// Leave removes one local connection of user from presence channel ch. When it was the
// user's last one here, it calls f under the presence lock with removed (the user is a member
// on no node now); f returns whether it reported the member_removed activity.
func (a *App) Leave(ch *Channel, user string, f func(removed bool) (reported bool)) {
	p := ch.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[user]
	if m == nil {
		return
	}
	if m.conns--; m.conns > 0 {
		return
	}
	delete(p.members, user)
	reported := f(!p.hasLocked(user)) // not a member on another node either
	a.others.markMember(a.id, ch.name, user, reported)
}

// Figures are an app's current counts on this node.
type Figures struct {
	Channels       int64 // with local subscribers
	Subscriptions  int64 // local
	CacheBytes     int64 // held by the last events of cache channels, see Config.CacheMaxBytesPerApp
	CacheEntries   int64
	CacheEvictions int64 // last events dropped to stay within a bound (not TTL expiries)
	// The events history channels keep here, see Config.HistoryMaxBytesPerApp.
	HistoryBytes, HistoryEntries int64
	HistoryEvictions             int64 // forgotten to stay within the bound (not size or TTL)
}

// Figures returns the app's counts now.
func (a *App) Figures() Figures {
	return Figures{
		Channels:       a.table.count.Load(),
		Subscriptions:  a.table.subs.Load(),
		CacheBytes:     a.cache.bytes.Load(),
		CacheEntries:   a.cache.entries.Load(),
		CacheEvictions: a.cache.evictions.Load(),

		HistoryBytes:     a.hist.bytes.Load(),
		HistoryEntries:   a.hist.entries.Load(),
		HistoryEvictions: a.hist.evictions.Load(),
	}
}
