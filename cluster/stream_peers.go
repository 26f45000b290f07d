package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

// peers are the other live nodes as this one knows them from their batches: each one's share,
// the totals of their subscriptions, the features every live node reads and whether any is
// behind. Their changes are told to the listener: a channel occupied or vacated, a member
// added or removed anywhere.
type peers struct {
	epoch     uint64  // this node's: the lowest live epoch fires what no node fired
	reads     Feature // what this node reads
	heartbeat time.Duration
	now       func() int64 // ms
	upSince   func() int64 // when this node's bus came up, ms; 0 while it is down (liveness)
	apps      *apps
	l         Listener // set before the first batch (stream.listen)

	mu     sync.Mutex // guards byNode and totals (REST reads them)
	byNode map[string]*peer
	totals map[chanKey]int // other nodes' subscriptions, by channel

	inUse       atomic.Uint64 // Feature: what this node and every live peer read
	behindPeer  atomic.Pointer[string]
	behindNodes atomic.Int32
}

// peer is another node as this one knows it.
type peer struct {
	epoch, seq uint64
	lastSeen   int64 // ms
	askedAt    int64 // ms; when this node last asked it for a snapshot
	share      *share
	staging    *share     // a snapshot being received
	node       nodeRecord // from its latest batch; the zero value for v0.1.0 (version 1)
}

// get returns the peer that is node, nil when none is.
func (s *peers) get(node string) *peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byNode[node]
}

// add makes p the peer that is node.
func (s *peers) add(node string, p *peer) {
	s.mu.Lock()
	s.byNode[node] = p
	s.mu.Unlock()
}

// setRecord makes nr the node record of p, recounting when it changed.
func (s *peers) setRecord(p *peer, nr nodeRecord) {
	if p.node != nr {
		s.mu.Lock()
		p.node = nr
		s.recountLocked()
		s.mu.Unlock()
	}
}

// silent lists the nodes not heard from since timeout (ms) before now.
func (s *peers) silent(now, timeout int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var dead []string
	for node, p := range s.byNode {
		if now-p.lastSeen >= timeout {
			dead = append(dead, node)
		}
	}
	return dead
}

// nodes lists the live nodes, in no order.
func (s *peers) nodes() []NodeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []NodeInfo
	for id, p := range s.byNode {
		out = append(out, NodeInfo{ID: id, Release: p.node.release, StateVersion: p.node.version, Features: p.node.features})
	}
	return out
}

// recountLocked sets the features in use: this node's, less what any live peer does not
// read; none until this node has had its bus for two heartbeats, by when every live node has
// been heard (each sends at least one batch a heartbeat), so that a node just started or back
// from an outage does not use a feature before it knows whether an older node is there. Call
// with s.mu held.
func (s *peers) recountLocked() {
	f := s.reads
	if up := s.upSince(); up == 0 || s.now()-up < 2*s.heartbeat.Milliseconds() {
		f = 0
	}
	behind, count := "", 0
	for name, p := range s.byNode {
		f &= p.node.features
		if p.node.behind {
			count++
			if behind == "" || name < behind {
				behind = name
			}
		}
	}
	s.inUse.Store(uint64(f))
	s.behindNodes.Store(int32(count))
	if behind == "" {
		s.behindPeer.Store(nil)
	} else {
		s.behindPeer.Store(&behind)
	}
}

// recount is recountLocked, taking s.mu.
func (s *peers) recount() {
	s.mu.Lock()
	s.recountLocked()
	s.mu.Unlock()
}

// behindCount is how many live nodes announce that they are behind.
func (s *peers) behindCount() int { return int(s.behindNodes.Load()) }

// lowestLocked reports whether this node has the lowest epoch of the live nodes it knows:
// the one that fires the activity of a change no other node fired. Call with s.mu held.
func (s *peers) lowestLocked() bool {
	for _, p := range s.byNode {
		if p.epoch < s.epoch {
			return false
		}
	}
	return true
}

// remoteSubs is the other nodes' subscription count of a channel.
func (s *peers) remoteSubs(app, channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals[chanKey{app, channel}]
}

// eachRemote calls f for each channel of app with subscribers on other nodes whose name
// starts with prefix.
func (s *peers) eachRemote(app, prefix string, f func(name string, subs int)) {
	s.mu.Lock()
	type kv struct {
		name string
		subs int
	}
	var list []kv
	for k, n := range s.totals {
		if k.app == app && len(k.channel) >= len(prefix) && k.channel[:len(prefix)] == prefix {
			list = append(list, kv{k.channel, n})
		}
	}
	s.mu.Unlock()
	for _, x := range list {
		f(x.name, x.subs)
	}
}

// remoteChannels adds to stats (this node's channels of a) the other nodes' channels whose
// names start with prefix, with the cluster's counts.
func (s *peers) remoteChannels(a *App, prefix string, stats []herald.ChannelStat) []herald.ChannelStat {
	at := make(map[string]int, len(stats))
	for i, st := range stats {
		at[st.Name] = i
	}
	s.eachRemote(a.id, prefix, func(name string, subs int) {
		if i, ok := at[name]; ok {
			stats[i].SubscriptionCount += subs
			return
		}
		stats = append(stats, herald.ChannelStat{Name: name, SubscriptionCount: subs, UserCount: a.table.pres.lookup(name).count()})
	})
	return stats
}

// apply records rec in the live share sh of a node, updating the totals and the presence
// channels, whose local subscribers get member_added / member_removed when a user becomes or
// stops being a member anywhere.
func (s *peers) apply(sh *share, rec stateRecord) {
	k := chanKey{rec.app, rec.channel}
	switch rec.op {
	case recSubs:
		s.mu.Lock()
		old := sh.subs[k]
		if rec.subs > 0 {
			sh.subs[k] = rec.subs
		} else {
			delete(sh.subs, k)
		}
		before := s.totals[k]
		after := before + rec.subs - old
		if after > 0 {
			s.totals[k] = after
		} else {
			delete(s.totals, k)
		}
		fire := !rec.fired && (before > 0) != (after > 0) && s.lowestLocked()
		s.mu.Unlock()
		if a := s.apps.app(rec.app); fire && (a == nil || a.table.localSubs(rec.channel) == 0) {
			kind := herald.ChannelOccupied
			if after == 0 {
				kind = herald.ChannelVacated
			}
			if s.l.Wants(rec.app, kind) {
				s.l.Emit(rec.app, &herald.Activity{Kind: kind, Channel: rec.channel})
			}
		}
		if rec.subs != old {
			s.l.CountChanged(rec.app, rec.channel)
		}
	case recMember:
		_, was := sh.members[k][rec.user]
		if was == rec.present {
			return
		}
		sh.set(rec)
		if rec.channel == usersChannel {
			s.l.RemoteUser(rec.app, rec.user, rec.present)
			return
		}
		// An app this node has not added yet (created while the nodes run, not yet known
		// here) has no presence table to keep the member in.
		if a := s.apps.app(rec.app); a != nil {
			s.remoteMember(a, rec.channel, rec.user, rec.info, rec.present, rec.fired)
		}
	}
}

// remoteMember counts one other node more (present) or less with user as a member of the
// presence channel, and tells the local subscribers when that changes whether the user is a
// member anywhere.
//
// fired is whether the node whose record this is reported the change's activity; when it did
// not and the change is one here, the node with the lowest epoch reports it.
func (s *peers) remoteMember(a *App, channel, user string, info []byte, present, fired bool) {
	t := a.table.pres
	p := t.lockRemote(channel)
	before := p.hasLocked(user)
	if p.remote == nil {
		p.remote = map[string]*remoteMember{}
	}
	r := p.remote[user]
	if present {
		if r == nil {
			r = &remoteMember{info: info}
			p.remote[user] = r
		}
		r.nodes++
	} else if r != nil {
		if r.nodes--; r.nodes <= 0 {
			delete(p.remote, user)
		}
	}
	after := p.hasLocked(user)
	if before != after && !fired {
		kind := herald.MemberRemoved
		if after {
			kind = herald.MemberAdded
		}
		if s.l.Wants(a.id, kind) {
			s.mu.Lock()
			lowest := s.lowestLocked()
			s.mu.Unlock()
			if lowest {
				s.l.Emit(a.id, &herald.Activity{Kind: kind, Channel: channel, UserID: user})
			}
		}
	}
	if before != after && p.ch != nil {
		if after {
			s.l.MemberAdded(a.id, p.ch, herald.Member{UserID: user, Info: r.info})
		} else {
			s.l.MemberRemoved(a.id, p.ch, user)
		}
	}
	p.mu.Unlock()
	t.tidy(p)
}

// replace makes next p's share, applying only the differences. Each says it fired as the
// snapshot's record of its key did (a record that is not there fired), except when p is
// dropped (gone: the lowest live node fires its removals).
func (s *peers) replace(p *peer, next *share, dropped bool) {
	old := p.share
	for k := range old.subs {
		if _, ok := next.subs[k]; !ok {
			s.apply(old, stateRecord{op: recSubs, app: k.app, channel: k.channel, fired: !dropped && !next.unfiredSubs[k]})
		}
	}
	for k, n := range next.subs {
		s.apply(old, stateRecord{op: recSubs, app: k.app, channel: k.channel, subs: n, fired: !next.unfiredSubs[k]})
	}
	for k, m := range old.members {
		for user := range m {
			if _, ok := next.members[k][user]; !ok {
				s.apply(old, stateRecord{op: recMember, app: k.app, channel: k.channel, user: user,
					fired: !dropped && !next.unfiredMembers[memberKey{k.app, k.channel, user}]})
			}
		}
	}
	for k, m := range next.members {
		for user, info := range m {
			s.apply(old, stateRecord{op: recMember, app: k.app, channel: k.channel, user: user, present: true, info: info,
				fired: !next.unfiredMembers[memberKey{k.app, k.channel, user}]})
		}
	}
}

// drop forgets a node: its share leaves every count and member list (it is no longer among
// the live nodes then, for lowestLocked). Called with the receiver's applyMu.
func (s *peers) drop(node string, p *peer) {
	s.mu.Lock()
	if s.byNode[node] == p {
		delete(s.byNode, node)
	}
	s.recountLocked()
	s.mu.Unlock()
	s.replace(p, newShare(), true)
}
