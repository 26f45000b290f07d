package cluster

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// Channel is one channel with local subscribers, of one app. It exists from its first local
// subscription (State.Acquire) to its last (State.Release); a cluster node's history channel
// lingers a while after its last (linger.go), so that a subscription soon after finds its
// copy of the history and its interest on the bus as they were.
type Channel struct {
	fanout.Channel // its subscribers, by worker
	name           string
	info           herald.ChannelInfo
	subs           int       // local subscriptions; guarded by the table shard's lock
	idleSince      int64     // while it lingers with no subscription: since when (engine ms); guarded by the shard's lock
	presence       *presence // the members of a presence channel; nil for other kinds
	gate           Gate      // open once the other nodes' events for the channel reach this one
	// rule is the channel's history rule when hasHist; a cluster node's copy of the
	// channel's history is hist (a single node's is in its histStore, by name).
	rule    herald.HistoryRule
	hasHist bool
	hist    *chanHist
}

// Name returns the channel's name.
func (ch *Channel) Name() string { return ch.name }

// Info returns what the channel's name says of it.
func (ch *Channel) Info() herald.ChannelInfo { return ch.info }

// Gate is the channel's gate: subscriptions wait at it until the node's interest in the
// channel is on the bus.
func (ch *Channel) Gate() *Gate { return &ch.gate }

const tableShards = 32

// table maps channel names to the channels with local subscribers of one app, in locked
// shards.
type table struct {
	seed   maphash.Seed
	eng    *fanout.Engine
	pres   *presenceTable        // the app's presence channels' members, local and remote
	hist   *histStore            // the app's histories
	copies bool                  // a cluster node: each history channel holds a copy of its history
	total  *atomic.Int64         // node-wide channel count
	count  atomic.Int64          // this app's channels with local subscribers
	subs   atomic.Int64          // this app's subscriptions
	linger int64                 // how long a history channel's copy outlives its last subscription, ms; 0: not at all
	idleMu sync.Mutex            // guards idle; taken under a shard's lock (a leaf)
	idle   map[*Channel]struct{} // the channels lingering without subscription
	shards [tableShards]struct {
		mu sync.RWMutex
		m  map[string]*Channel
	}
}

func newTable(eng *fanout.Engine, total *atomic.Int64, hist *histStore, copies bool, linger int64) *table {
	t := &table{seed: maphash.MakeSeed(), eng: eng, pres: newPresenceTable(), total: total, hist: hist, copies: copies,
		linger: linger, idle: map[*Channel]struct{}{}}
	for i := range t.shards {
		t.shards[i].m = map[string]*Channel{}
	}
	return t
}

func (t *table) shard(name string) int {
	return int(maphash.String(t.seed, name) % tableShards)
}

// lookup returns the channel name, or nil: lingering ones included.
func (t *table) lookup(name string) *Channel {
	s := &t.shards[t.shard(name)]
	s.mu.RLock()
	ch := s.m[name]
	s.mu.RUnlock()
	return ch
}

// lookupLive returns the channel name if it has local subscriptions, or nil.
func (t *table) lookupLive(name string) *Channel {
	s := &t.shards[t.shard(name)]
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ch := s.m[name]; ch != nil && ch.subs > 0 {
		return ch
	}
	return nil
}

// acquire returns the channel, creating it, and counts one more subscription. first is true
// when it had none: it was created (its gate open at once when open is) or, revived, it
// lingered with its gate and copy as they were.
func (t *table) acquire(name string, info herald.ChannelInfo, open bool) (ch *Channel, first, revived bool) {
	s := &t.shards[t.shard(name)]
	s.mu.Lock()
	ch = s.m[name]
	switch {
	case ch == nil:
		first = true
		ch = &Channel{Channel: t.eng.NewChannel(), name: name, info: info}
		if info.Kind == herald.Presence {
			ch.presence = t.pres.hold(name)
		}
		if ch.rule, ch.hasHist = t.hist.rule(name); ch.hasHist && t.copies {
			ch.hist = t.hist.newHist(name, ch.rule)
			ch.hist.busy = true // until loaded
			open = false
		}
		if open {
			ch.gate.ready.Store(true)
		}
		s.m[name] = ch
		t.total.Add(1)
		t.count.Add(1)
	case ch.subs == 0:
		first, revived = true, true
		if info.Kind == herald.Presence {
			ch.presence = t.pres.hold(name)
		}
		t.idleMu.Lock()
		delete(t.idle, ch)
		t.idleMu.Unlock()
		t.total.Add(1)
		t.count.Add(1)
	}
	ch.subs++
	t.subs.Add(1)
	s.mu.Unlock()
	return ch, first, revived
}

// release counts one subscription less and, when it was the last, forgets the channel or,
// for a history channel's copy, lets it linger (lingers). last is true when it was the last.
func (t *table) release(ch *Channel) (last, lingers bool) {
	s := &t.shards[t.shard(ch.name)]
	s.mu.Lock()
	ch.subs--
	t.subs.Add(-1)
	if ch.subs == 0 && s.m[ch.name] == ch {
		last = true
		t.total.Add(-1)
		t.count.Add(-1)
		if lingers = ch.hist != nil && t.linger > 0; lingers {
			ch.idleSince = t.eng.Now()
			t.idleMu.Lock()
			t.idle[ch] = struct{}{}
			t.idleMu.Unlock()
		} else {
			delete(s.m, ch.name)
		}
	}
	s.mu.Unlock()
	if last && ch.presence != nil {
		t.pres.unhold(ch.presence, ch)
	}
	return last, lingers
}

// expired forgets the channels that have lingered without subscription for the table's
// linger by now, and returns them.
func (t *table) expired(now int64) []*Channel {
	t.idleMu.Lock()
	var due []*Channel
	for ch := range t.idle {
		due = append(due, ch)
	}
	t.idleMu.Unlock()
	var gone []*Channel
	for _, ch := range due {
		s := &t.shards[t.shard(ch.name)]
		s.mu.Lock()
		if ch.subs == 0 && s.m[ch.name] == ch && now-ch.idleSince >= t.linger {
			delete(s.m, ch.name)
			t.idleMu.Lock()
			delete(t.idle, ch)
			t.idleMu.Unlock()
			gone = append(gone, ch)
		}
		s.mu.Unlock()
	}
	return gone
}

// each calls f with every channel, one shard at a time under its read lock.
func (t *table) each(f func(ch *Channel)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for _, ch := range s.m {
			f(ch)
		}
		s.mu.RUnlock()
	}
}

// localSubs is this node's subscription count of channel name (0 when it has none).
func (t *table) localSubs(name string) int {
	s := &t.shards[t.shard(name)]
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ch := s.m[name]; ch != nil {
		return ch.subs
	}
	return 0
}

// lingering is how many channels linger without subscription.
func (t *table) lingering() int {
	t.idleMu.Lock()
	defer t.idleMu.Unlock()
	return len(t.idle)
}

// eachLocal calls f with every channel's name and subscription count, one shard at a time
// under its read lock.
func (t *table) eachLocal(f func(name string, subs int)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for name, ch := range s.m {
			if ch.subs > 0 {
				f(name, ch.subs)
			}
		}
		s.mu.RUnlock()
	}
}

// stats returns every channel whose name starts with prefix, with this node's counts.
func (t *table) stats(prefix string) []herald.ChannelStat {
	var out []herald.ChannelStat
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for name, ch := range s.m {
			if ch.subs > 0 && len(name) >= len(prefix) && name[:len(prefix)] == prefix {
				out = append(out, herald.ChannelStat{Name: name, SubscriptionCount: ch.subs, UserCount: ch.presence.count()})
			}
		}
		s.mu.RUnlock()
	}
	return out
}

// stat returns one channel's figures on this node; ok is false when it has no subscribers.
func (t *table) stat(name string) (herald.ChannelStat, bool) {
	s := &t.shards[t.shard(name)]
	s.mu.RLock()
	defer s.mu.RUnlock()
	ch := s.m[name]
	if ch == nil || ch.subs == 0 {
		return herald.ChannelStat{Name: name}, false
	}
	return herald.ChannelStat{Name: name, SubscriptionCount: ch.subs, UserCount: ch.presence.count()}, true
}
