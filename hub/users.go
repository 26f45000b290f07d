package hub

import (
	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// signin handles pusher:signin. A bad signature closes the connection with 4009, as Pusher
// does; sign-in on an app without user authentication is refused with a 4009 error.
func (h *Hub) signin(c *Conn, m pusher.Message) {
	a := c.app
	if !a.app.EnableUserAuthentication {
		h.sendError(c, herald.CodeForbidden, "user authentication is not enabled for this app")
		return
	}
	s, err := pusher.DecodeSignin(m.Data)
	if err != nil {
		h.closeWith(c, herald.CodeUnauthorized, herald.MessageOf(err))
		return
	}
	if !pusher.CheckUserAuth(a.app, c.sid, s.UserData, s.Auth) {
		h.closeWith(c, herald.CodeUnauthorized, "invalid signin signature")
		return
	}
	ud, err := pusher.DecodeUserData(s.UserData)
	if err != nil {
		h.closeWith(c, herald.CodeUnauthorized, herald.MessageOf(err))
		return
	}
	if c.user != "" {
		h.forgetUser(c)
	}
	c.user = ud.ID
	a.usersMu.Lock()
	first := len(a.users[ud.ID]) == 0
	a.users[ud.ID] = append(a.users[ud.ID], c)
	c.w.inbox <- cmd{op: opSend, c: c, frame: ws.TextFrame(pusher.AppendSigninSuccess(nil, s.UserData))}
	h.watchLocked(c, ud.Watchlist, first) // under the lock, after the signin_success
	a.usersMu.Unlock()
}

func (h *Hub) forgetUser(c *Conn) {
	a := c.app
	a.usersMu.Lock()
	list := a.users[c.user]
	for i, x := range list {
		if x == c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(a.users, c.user)
	} else {
		a.users[c.user] = list
	}
	h.unwatchLocked(c, len(list) == 0)
	a.usersMu.Unlock()
}

// TerminateUser closes every connection signed in as userID with 4009, on every node of a
// cluster, and returns how many it closed on this one.
func (h *Hub) TerminateUser(appID, userID string) int {
	if h.bus != nil {
		h.busTerminate(appID, userID)
	}
	return h.closeUser(appID, userID)
}

// closeUser closes the connections signed in as userID on this node.
func (h *Hub) closeUser(appID, userID string) int {
	a := h.apps[appID]
	if a == nil {
		return 0
	}
	a.usersMu.Lock()
	list := append([]*Conn(nil), a.users[userID]...)
	a.usersMu.Unlock()
	for _, c := range list {
		h.closeWith(c, herald.CodeUnauthorized, "connection terminated by the app")
	}
	return len(list)
}

// Channels lists the app's occupied channels whose names start with prefix: in a cluster,
// those occupied on any node, with the cluster's counts.
func (h *Hub) Channels(appID, prefix string) []herald.ChannelStat {
	a := h.apps[appID]
	if a == nil {
		return nil
	}
	stats := a.channels.stats(prefix)
	if h.state == nil {
		return stats
	}
	at := make(map[string]int, len(stats))
	for i, st := range stats {
		at[st.Name] = i
	}
	h.state.remoteChannels(appID, prefix, func(name string, subs int) {
		if i, ok := at[name]; ok {
			stats[i].SubscriptionCount += subs
			return
		}
		stats = append(stats, herald.ChannelStat{Name: name, SubscriptionCount: subs, UserCount: a.channels.pres.lookup(name).count()})
	})
	return stats
}

// Channel reports one channel; occupied is false when nobody is subscribed (on any node).
func (h *Hub) Channel(appID, name string) (stat herald.ChannelStat, occupied bool) {
	a := h.apps[appID]
	if a == nil {
		return herald.ChannelStat{Name: name}, false
	}
	st, ok := a.channels.stat(name)
	if h.state == nil {
		return st, ok
	}
	st.SubscriptionCount += h.state.remoteSubs(appID, name)
	st.UserCount = a.channels.pres.lookup(name).count()
	return st, st.SubscriptionCount > 0
}

// Cached reports whether a cache channel holds an event.
func (h *Hub) Cached(appID, name string) bool {
	if a := h.apps[appID]; a != nil {
		return a.cache.has(name, h.now())
	}
	return false
}

// Users lists the user ids in a presence channel (on every node of a cluster).
func (h *Hub) Users(appID, name string) []string {
	a := h.apps[appID]
	if a == nil {
		return nil
	}
	if h.state != nil {
		return a.channels.pres.lookup(name).users()
	}
	if ch := a.channels.lookup(name); ch != nil {
		return ch.presence.users()
	}
	return nil
}
