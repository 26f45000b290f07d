package cluster

import (
	"hash/maphash"
	"sort"
	"sync"

	"github.com/herald-rt/herald"
)

// presence is the member list of one presence channel. A user counts once however many of
// their connections joined, on whatever node; member_added and member_removed follow the
// first join and the last leave. Frames about membership are dispatched while mu is held, so
// every subscriber sees joins and leaves in the order they happened.
//
// remote holds the members other nodes have (see stream_peers.go), and one presence serves the
// channel on this node whether or not it has local subscribers: the app's presenceTable keeps
// it while either side has members, and ch is the local Channel while there is one, so that
// a remote join or leave reaches the local subscribers.
type presence struct {
	mu      sync.Mutex
	members map[string]*member // this node's members
	remote  map[string]*remoteMember
	ch      *Channel // the local channel while it has members here, or nil

	// Kept by the presenceTable under its shard lock.
	name  string
	holds int  // local Channels holding it
	dead  bool // removed from the table: whoever finds it locks, sees dead and looks again
}

type member struct {
	info  []byte
	conns int
}

// remoteMember is a user present on other nodes.
type remoteMember struct {
	info  []byte
	nodes int // how many other nodes have the user as a member
}

func newPresence() *presence { return &presence{members: map[string]*member{}} }

// has reports whether user is a member on any node. Call with p.mu held.
func (p *presence) hasLocked(user string) bool {
	return p.members[user] != nil || p.remote[user] != nil
}

// countLocked is the number of distinct users on every node. Call with p.mu held.
func (p *presence) countLocked() int {
	n := len(p.members)
	for id := range p.remote {
		if p.members[id] == nil {
			n++
		}
	}
	return n
}

// count returns the number of distinct users (0 for a nil presence).
func (p *presence) count() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.countLocked()
}

// snapshotLocked lists the members, sorted by id. Call with p.mu held.
func (p *presence) snapshotLocked() []herald.Member {
	out := make([]herald.Member, 0, len(p.members)+len(p.remote))
	for id, m := range p.members {
		out = append(out, herald.Member{UserID: id, Info: m.info})
	}
	for id, m := range p.remote {
		if p.members[id] == nil {
			out = append(out, herald.Member{UserID: id, Info: m.info})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UserID < out[j].UserID })
	return out
}

// users lists the member ids, sorted.
func (p *presence) users() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.members)+len(p.remote))
	for id := range p.members {
		out = append(out, id)
	}
	for id := range p.remote {
		if p.members[id] == nil {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// presenceTable holds an app's presence channels: those with local subscribers or members on
// other nodes.
type presenceTable struct {
	seed   maphash.Seed
	shards [tableShards]struct {
		mu sync.Mutex
		m  map[string]*presence
	}
}

func newPresenceTable() *presenceTable {
	t := &presenceTable{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = map[string]*presence{}
	}
	return t
}

func (t *presenceTable) shard(name string) *struct {
	mu sync.Mutex
	m  map[string]*presence
} {
	return &t.shards[maphash.String(t.seed, name)%tableShards]
}

// hold returns name's presence, creating it, for a local Channel.
func (t *presenceTable) hold(name string) *presence {
	s := t.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.m[name]
	if p == nil {
		p = newPresence()
		p.name = name
		s.m[name] = p
	}
	p.holds++
	return p
}

// unhold gives back a local Channel's hold on p, detaching ch from it.
func (t *presenceTable) unhold(p *presence, ch *Channel) {
	p.mu.Lock()
	if p.ch == ch {
		p.ch = nil
	}
	p.mu.Unlock()
	s := t.shard(p.name)
	s.mu.Lock()
	p.holds--
	s.mu.Unlock()
	t.tidy(p)
}

// lookup returns name's presence, or nil.
func (t *presenceTable) lookup(name string) *presence {
	s := t.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name]
}

// lockRemote returns name's presence locked, creating it, for a change other nodes made.
func (t *presenceTable) lockRemote(name string) *presence {
	for {
		s := t.shard(name)
		s.mu.Lock()
		p := s.m[name]
		if p == nil {
			p = newPresence()
			p.name = name
			s.m[name] = p
		}
		s.mu.Unlock()
		p.mu.Lock()
		if !p.dead {
			return p
		}
		p.mu.Unlock()
	}
}

// tidy removes p from the table when nothing holds it: no local Channel, no remote member.
func (t *presenceTable) tidy(p *presence) {
	s := t.shard(p.name)
	p.mu.Lock()
	s.mu.Lock()
	if p.holds == 0 && len(p.remote) == 0 && len(p.members) == 0 && s.m[p.name] == p {
		delete(s.m, p.name)
		p.dead = true
	}
	s.mu.Unlock()
	p.mu.Unlock()
}

// each calls f for every presence channel whose name starts with prefix.
func (t *presenceTable) each(prefix string, f func(name string, p *presence)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		list := make([]*presence, 0, len(s.m))
		for name, p := range s.m {
			if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
				list = append(list, p)
			}
		}
		s.mu.Unlock()
		for _, p := range list {
			f(p.name, p)
		}
	}
}
