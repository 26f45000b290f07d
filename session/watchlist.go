package session

import (
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// Watchlists, as Pusher documents them: a signed-in user's user_data may carry a "watchlist"
// of user ids (at most pusher.MaxWatchlist). On sign-in the connection gets one
// pusher_internal:watchlist_events with the status of each: "online" for those signed in,
// "offline" for the others. From then on it gets "online" when a watched user's first
// connection signs in and "offline" when its last signed-in connection goes. pusher-js emits
// each entry on pusher.user.watchlist under its name.
//
// A user is online when a connection is signed in as it, on any node of a cluster: each node
// tells its state of its signed-in users (cluster.State.SignedIn), which the other nodes' learn
// of (cluster.Listener.RemoteUser) and keep in appState.remoteUsers. A dead node's users go
// offline when its share is dropped.
//
// Everything here runs with appState.usersMu held, and sends the frames under it, so a
// watcher gets each user's changes in the order they happened, and its sign-in status before
// any change after it. Users without a watchlist, and everyone else, pay one map lookup per
// first sign-in and last sign-out of a user.

// watchLocked follows c's signing in as c.user() with watchlist: it tells the user's watchers
// that it is online when first (c is its first signed-in connection), registers c as a
// watcher and sends c its watchlist's status. Called with c.app.usersMu held, after c joined
// the app's users.
func (s *Server) watchLocked(c *conn, watchlist []string, first bool) {
	a := c.app
	if first {
		s.st.SignedIn(a.st, c.user(), true)
		if a.remoteUsers[c.user()] == 0 {
			s.tellWatchersLocked(a, c.user(), "online")
		}
	}
	if len(watchlist) == 0 {
		return
	}
	if a.watchers == nil {
		a.watchers = map[string][]*conn{}
	}
	var online, offline []string
	seen := make(map[string]bool, len(watchlist))
	for _, id := range watchlist {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		c.extra().watching = append(c.extra().watching, id)
		a.watchers[id] = append(a.watchers[id], c)
		if len(a.users[id]) > 0 || a.remoteUsers[id] > 0 {
			online = append(online, id)
		} else {
			offline = append(offline, id)
		}
	}
	s.eng.Send(&c.Conn, ws.TextFrame(pusher.AppendWatchlistStatus(nil, online, offline)))
}

// unwatchLocked follows c's leaving its user: it stops watching, and when last (c was the
// user's last signed-in connection) the user's watchers are told it is offline. Called with
// c.app.usersMu held, after c left the app's users.
func (s *Server) unwatchLocked(c *conn, last bool) {
	a := c.app
	var watching []string
	if c.x != nil {
		watching, c.x.watching = c.x.watching, nil
	}
	for _, id := range watching {
		list := a.watchers[id]
		for i, x := range list {
			if x == c {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(a.watchers, id)
		} else {
			a.watchers[id] = list
		}
	}
	if last {
		s.st.SignedIn(a.st, c.user(), false)
		if a.remoteUsers[c.user()] == 0 {
			s.tellWatchersLocked(a, c.user(), "offline")
		}
	}
}

// tellWatchersLocked sends the watchers of user one event, name "online" or "offline": one
// frame, shared. Called with a.usersMu held.
func (s *Server) tellWatchersLocked(a *appState, user, name string) {
	list := a.watchers[user]
	if len(list) == 0 {
		return
	}
	frame := ws.TextFrame(pusher.AppendWatchlistEvent(nil, name, []string{user}))
	for _, c := range list {
		s.eng.Send(&c.Conn, frame)
	}
}

// remoteUser counts one other node more (present) or less where user is signed in, and tells
// its watchers when that changes whether it is online anywhere.
func (s *Server) remoteUser(a *appState, user string, present bool) {
	a.usersMu.Lock()
	defer a.usersMu.Unlock()
	before := len(a.users[user]) > 0 || a.remoteUsers[user] > 0
	if a.remoteUsers == nil {
		a.remoteUsers = map[string]int{}
	}
	if present {
		a.remoteUsers[user]++
	} else if a.remoteUsers[user]--; a.remoteUsers[user] <= 0 {
		delete(a.remoteUsers, user)
	}
	switch after := len(a.users[user]) > 0 || a.remoteUsers[user] > 0; {
	case after && !before:
		s.tellWatchersLocked(a, user, "online")
	case before && !after:
		s.tellWatchersLocked(a, user, "offline")
	}
}
