package hub

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/herald-rt/herald"
)

// Channel is one occupied channel of one app. It exists while it has subscribers.
type Channel struct {
	name string
	info herald.ChannelInfo
	// wcount[i] is how many of worker i's connections are subscribed: publishers skip
	// workers with none.
	wcount   []atomic.Int32
	subs     int // subscriptions; guarded by the registry shard's lock
	presence *presence
	bus      *busInterest // this node's interest on the cluster bus; nil on a single node
}

// Name returns the channel's name.
func (ch *Channel) Name() string { return ch.name }

const registryShards = 32

// registry maps channel names to occupied channels for one app, in locked shards.
type registry struct {
	seed      maphash.Seed
	workers   int
	clustered bool           // channels carry bus interest (Channel.bus)
	pres      *presenceTable // in a cluster: presence channels' members, local and remote
	total     *atomic.Int64  // hub-wide channel count
	count     atomic.Int64   // this app's occupied channels
	subs      atomic.Int64   // this app's subscriptions
	shards    [registryShards]struct {
		mu sync.RWMutex
		m  map[string]*Channel
	}
}

func newRegistry(workers int, total *atomic.Int64) *registry {
	r := &registry{seed: maphash.MakeSeed(), workers: workers, total: total}
	for i := range r.shards {
		r.shards[i].m = map[string]*Channel{}
	}
	return r
}

func (r *registry) shard(name string) int {
	return int(maphash.String(r.seed, name) % registryShards)
}

// lookup returns the occupied channel name, or nil.
func (r *registry) lookup(name string) *Channel {
	s := &r.shards[r.shard(name)]
	s.mu.RLock()
	ch := s.m[name]
	s.mu.RUnlock()
	return ch
}

// acquire returns the channel, creating it, and counts one more subscription. first is true
// when the channel was created: its first local subscriber, when a cluster node takes
// interest in it on the bus. The caller reports the change (core.subsChanged).
func (r *registry) acquire(name string, info herald.ChannelInfo) (ch *Channel, first bool) {
	s := &r.shards[r.shard(name)]
	s.mu.Lock()
	ch = s.m[name]
	if ch == nil {
		first = true
		ch = &Channel{name: name, info: info, wcount: make([]atomic.Int32, r.workers)}
		if info.Kind == herald.Presence {
			if r.pres != nil {
				ch.presence = r.pres.hold(name)
			} else {
				ch.presence = newPresence()
			}
		}
		if r.clustered && !info.Cache {
			// Cache channels' events go to every node (BusCache): no interest of their own.
			ch.bus = &busInterest{}
		}
		s.m[name] = ch
		r.total.Add(1)
		r.count.Add(1)
	}
	ch.subs++
	r.subs.Add(1)
	s.mu.Unlock()
	return ch, first
}

// release counts one subscription less and forgets the channel when it has none. last is
// true when it did: the channel's last local subscriber left.
func (r *registry) release(ch *Channel) (last bool) {
	s := &r.shards[r.shard(ch.name)]
	s.mu.Lock()
	ch.subs--
	r.subs.Add(-1)
	if ch.subs == 0 && s.m[ch.name] == ch {
		delete(s.m, ch.name)
		r.total.Add(-1)
		r.count.Add(-1)
		last = true
	}
	s.mu.Unlock()
	return last
}

// localSubs is this node's subscription count of channel name (0 when not occupied).
func (r *registry) localSubs(name string) int {
	s := &r.shards[r.shard(name)]
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ch := s.m[name]; ch != nil {
		return ch.subs
	}
	return 0
}

// eachLocal calls f with every occupied channel's name and subscription count, one shard
// at a time under its read lock.
func (r *registry) eachLocal(f func(name string, subs int)) {
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for name, ch := range s.m {
			f(name, ch.subs)
		}
		s.mu.RUnlock()
	}
}

// stats returns every occupied channel whose name starts with prefix.
func (r *registry) stats(prefix string) []herald.ChannelStat {
	var out []herald.ChannelStat
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for name, ch := range s.m {
			if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
				out = append(out, herald.ChannelStat{Name: name, SubscriptionCount: ch.subs, UserCount: ch.presence.count()})
			}
		}
		s.mu.RUnlock()
	}
	return out
}

// stat returns one channel's figures; ok is false when it is not occupied.
func (r *registry) stat(name string) (herald.ChannelStat, bool) {
	s := &r.shards[r.shard(name)]
	s.mu.RLock()
	defer s.mu.RUnlock()
	ch := s.m[name]
	if ch == nil {
		return herald.ChannelStat{Name: name}, false
	}
	return herald.ChannelStat{Name: name, SubscriptionCount: ch.subs, UserCount: ch.presence.count()}, true
}
