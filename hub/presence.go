package hub

import (
	"sort"
	"sync"

	"github.com/herald-rt/herald"
)

// presence is the member list of one presence channel. A user counts once however many of
// their connections joined; member_added and member_removed follow the first join and the
// last leave. Frames about membership are dispatched while mu is held, so every subscriber
// sees joins and leaves in the order they happened.
type presence struct {
	mu      sync.Mutex
	members map[string]*member
}

type member struct {
	info  []byte
	conns int
}

func newPresence() *presence { return &presence{members: map[string]*member{}} }

// count returns the number of distinct users (0 for a nil presence).
func (p *presence) count() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.members)
}

// snapshotLocked lists the members, sorted by id. Call with p.mu held.
func (p *presence) snapshotLocked() []herald.Member {
	out := make([]herald.Member, 0, len(p.members))
	for id, m := range p.members {
		out = append(out, herald.Member{UserID: id, Info: m.info})
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
	out := make([]string, 0, len(p.members))
	for id := range p.members {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
