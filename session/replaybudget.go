package session

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/herald-rt/herald/guard"
)

// ReplayBudget bounds the bytes of history replayed to recovering clients, per second, at four
// levels: each connection, each client address, each app on this node, and the node. A level
// whose PerSecond is 0 is unbounded. A recovery is let through whole while every level it is
// charged to has bytes left (so one large replay always starts on a quiet node), and its
// bytes are then charged to all four, which may go into debt; while one is in debt, a
// recovery is answered recovered:false with reason rate_limited and the live stream goes on
// (docs/recovery.md).
type ReplayBudget struct {
	Connection, Address, App, Node guard.Rate
	// IPv6Prefix is how client addresses are counted for Address: every IPv6 address of
	// one network of this many bits shares one budget (0: guard.DefaultIPv6Prefix).
	IPv6Prefix int
}

// The replay budget's levels, in the order of Server.ReplayRefusals.
var ReplayBudgetLevels = [...]string{"connection", "address", "app", "node"}

// replayBudgets are the node's shared budgets, and what they refused.
type replayBudgets struct {
	conn    guard.Rate
	addr    *guard.IPRate
	app     guard.Rate
	node    *guard.Shared
	refused [len(ReplayBudgetLevels)]atomic.Int64
}

func newReplayBudgets(b ReplayBudget) *replayBudgets {
	return &replayBudgets{conn: b.Connection, addr: guard.NewIPRate(b.Address, b.IPv6Prefix), app: b.App, node: guard.NewShared(b.Node)}
}

// replayCharge is one connection's part of the replay budget: its own bucket and its client
// address. A connection gets one with its first recovery request (most never make one), on
// its reader's goroutine; recoveries entered when a channel's gate opens use it too, hence
// the lock.
type replayCharge struct {
	mu   sync.Mutex
	b    guard.Bucket
	addr netip.Addr
}

// peer is what a connection's transport can tell of its client's address (*ws.Conn).
type peer interface{ PeerAddr() netip.Addr }

// charge returns c's replay charge, setting it up: call it on c's reader goroutine.
func (s *Server) charge(c *conn) *replayCharge {
	x := c.extra()
	if !x.charged {
		if p, ok := c.Transport().(peer); ok {
			x.rc.addr = p.PeerAddr()
		}
		x.charged = true
	}
	return &x.rc
}

// spendReplay charges the replay's bytes (size, asked only when they are charged) to c, its
// address, its app and the node, and reports true; or, when one of them is in debt, charges
// nothing, counts the refusal by level and reports false.
func (s *Server) spendReplay(c *conn, size func() int) bool {
	b, now := s.budgets, s.monoNow()
	rc := &c.x.rc
	level := -1
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch {
	case !rc.b.Solvent(b.conn, now):
		level = 0
	case !b.addr.Solvent(rc.addr, now):
		level = 1
	case !c.app.replay.Solvent(now):
		level = 2
	case !b.node.Solvent(now):
		level = 3
	}
	if level >= 0 {
		b.refused[level].Add(1)
		return false
	}
	f := float64(size())
	rc.b.Spend(b.conn, f, now)
	b.addr.Spend(rc.addr, f, now)
	c.app.replay.Spend(f, now)
	b.node.Spend(f, now)
	return true
}

// ReplayRefusals returns how many recoveries each level of the replay budget refused, in the
// order of ReplayBudgetLevels.
func (s *Server) ReplayRefusals() [len(ReplayBudgetLevels)]int64 {
	var out [len(ReplayBudgetLevels)]int64
	for i := range out {
		out[i] = s.budgets.refused[i].Load()
	}
	return out
}
