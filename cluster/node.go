package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// node is what both States are made of: the engine, the apps' channel tables, presence and
// caches, the listener, and others, the implementation's own part of the state (nothing on a
// single node, the stream to the other nodes in a cluster).
type node struct {
	cfg Config
	eng *fanout.Engine
	apps
	channels  atomic.Int64 // node-wide count of channels with local subscribers
	cache     *cacheNode
	hepoch    string        // a single node's epoch: its histories' epochs add a generation
	hgen      atomic.Uint64 // the last generation given
	copies    bool          // a cluster node: its history channels hold copies of their histories
	histStats HistoryStats
	keys      *keys
	l         Listener
	others    others

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// others is what the other nodes hear of this one, and what it knows of them.
type others interface {
	// markSubs, markMember and markUser queue a record of this node's share: a channel's
	// count here (edge: to or from zero, fired: this node reported the edge), a presence
	// member's first join or last leave here, a user's first sign-in or last sign-out here.
	markSubs(app, channel string, edge, fired bool)
	markMember(app, channel, user string, fired bool)
	markUser(app, user string, in bool)
	// remoteSubs is the other nodes' subscription count of a channel.
	remoteSubs(app, channel string) int
	// remoteChannels adds the other nodes' channels whose names start with prefix to stats.
	remoteChannels(a *App, prefix string, stats []herald.ChannelStat) []herald.ChannelStat
}

func newNode(cfg Config, eng *fanout.Engine) node {
	cfg = cfg.withDefaults()
	return node{cfg: cfg, eng: eng, cache: newCacheNode(cfg), hepoch: newEpoch(), keys: newKeys(cfg.KeyWindow, cfg.MaxKeys), stop: make(chan struct{})}
}

// newEpoch returns a random epoch: 8 bytes, in hex.
func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AddApp implements State.
func (n *node) AddApp(id string, g *fanout.Group, rules []herald.HistoryRule) *App {
	hs := newHistStore(rules, int64(n.cfg.HistoryMaxBytesPerApp), n.hepoch, &n.hgen)
	var linger int64
	if n.copies && n.cfg.HistoryLinger > 0 {
		linger = n.cfg.HistoryLinger.Milliseconds()
	}
	a := &App{id: id, group: g, table: newTable(n.eng, &n.channels, hs, n.copies, linger), hist: hs, cache: newCache(n.cache), eng: n.eng, others: n.others}
	n.put(a)
	return a
}

// start starts the cache's expiry.
func (n *node) start(l Listener) {
	n.l = l
	n.wg.Add(1)
	go n.expire()
}

// halt stops the node's goroutines.
func (n *node) halt() {
	n.stopped.Do(func() { close(n.stop) })
	n.wg.Wait()
}

// expire forgets cache entries past their TTL every second, and compacts the caches' maps
// every minute.
func (n *node) expire() {
	defer n.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-t.C:
			now := n.eng.Now()
			n.cache.expire(now)
			if i%60 == 0 {
				n.cache.compact()
				n.eachApp(func(_ string, a *App) { a.hist.forgetIdle(now) })
			}
		case <-n.stop:
			return
		}
	}
}

// KeyStats implements State.
func (n *node) KeyStats() KeyStats { return n.keys.stats() }

// HistoryStats implements State.
func (n *node) HistoryStats() *HistoryStats { return &n.histStats }

// Counted implements State.
func (n *node) Counted(a *App, name string, edge, reported bool) {
	n.others.markSubs(a.id, name, edge, reported)
}

// RemoteSubs implements State.
func (n *node) RemoteSubs(a *App, name string) int { return n.others.remoteSubs(a.id, name) }

// Channels implements State.
func (n *node) Channels(a *App, prefix string) []herald.ChannelStat {
	return n.others.remoteChannels(a, prefix, a.table.stats(prefix))
}

// Channel implements State.
func (n *node) Channel(a *App, name string) (herald.ChannelStat, bool) {
	st, _ := a.table.stat(name)
	st.SubscriptionCount += n.others.remoteSubs(a.id, name)
	st.UserCount = a.table.pres.lookup(name).count()
	return st, st.SubscriptionCount > 0
}

// SignedIn implements State.
func (n *node) SignedIn(a *App, user string, in bool) { n.others.markUser(a.id, user, in) }

// deliver sends frame to channel name's local subscribers but the connection numbered excl;
// a cache channel also keeps it. s, when not nil, holds the slots reserved for it; origin,
// when not 0, is the event's origin in Unix nanoseconds.
func (n *node) deliver(a *App, name string, cache bool, frame []byte, excl uint64, s *fanout.Slots, origin int64) {
	m := a.group.Measure(origin)
	if rule, ok := a.hist.rule(name); ok && !n.copies {
		n.keep(a, name, rule, frame, excl, s, m)
		return
	}
	n.dispatch(a, name, cache, frame, excl, s, m)
}

// dispatch is deliver without history: a client event is not kept.
func (n *node) dispatch(a *App, name string, cache bool, frame []byte, excl uint64, s *fanout.Slots, m fanout.Measure) {
	if cache {
		a.cache.with(name, n.eng.Now(), func([]byte) []byte {
			if ch := a.table.lookup(name); ch != nil {
				n.eng.Dispatch(&ch.Channel, frame, excl, s, m)
			}
			return frame
		})
		return
	}
	if ch := a.table.lookup(name); ch != nil {
		n.eng.Dispatch(&ch.Channel, frame, excl, s, m)
	}
}
