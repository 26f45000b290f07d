package session

import (
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/guard"
)

// conn is one client connection: its outbound side (the engine's) and its read side,
// owned by the poller goroutine that reads it until the hang-up.
type conn struct {
	fanout.Conn
	app   *appState
	subs  []sub
	joins guard.Bucket // subscribe rate
	// x is what few connections use, made by the reader when one first needs it (a
	// connection's size class is memory every idle connection pays: see TestConnSize).
	x *connExtra
}

// connExtra is the part of a connection few use: a signed-in user, client events, a
// watchlist, recovery.
type connExtra struct {
	user     string       // signed-in user id
	events   guard.Bucket // client-event rate, from its first client event
	watching []string     // the user ids of its watchlist (see watchlist.go)
	rc       replayCharge // its replay budget, from its first recovery request (replaybudget.go)
	charged  bool         // rc is set up
}

// user is the user id c signed in as; "" when it has not.
func (c *conn) user() string {
	if c.x == nil {
		return ""
	}
	return c.x.user
}

// extra returns c.x, making it: call it on c's reader goroutine.
func (c *conn) extra() *connExtra {
	if c.x == nil {
		c.x = &connExtra{}
	}
	return c.x
}

// sub is one channel a connection joined: two words for a public or private channel.
type sub struct {
	ch *cluster.Channel
	// w is set for a presence channel (the member this connection joined as) and for a
	// subscription that waited at its channel's gate (its state, see waiter.go).
	w *waiter
}

// userID is the member a presence subscription joined as ("" for other channels).
func (s sub) userID() string {
	if s.w == nil {
		return ""
	}
	return s.w.member.UserID
}

// confirmed reports whether the subscription has entered its channel.
func (s sub) confirmed() bool { return s.w == nil || s.w.state.Load() == joined }

// subIndex returns the index of c's subscription to name, or -1. A subscription refused when
// its gate opened (see waiter.Enter) is dropped here: it holds nothing.
func (c *conn) subIndex(name string) int {
	for i := range c.subs {
		if c.subs[i].ch.Name() == name {
			if w := c.subs[i].w; w != nil && w.state.Load() == failed {
				c.subs = append(c.subs[:i], c.subs[i+1:]...)
				return -1
			}
			return i
		}
	}
	return -1
}
