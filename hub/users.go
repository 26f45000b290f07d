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
	a.users[ud.ID] = append(a.users[ud.ID], c)
	a.usersMu.Unlock()
	c.w.inbox <- cmd{op: opSend, c: c, frame: ws.TextFrame(pusher.AppendSigninSuccess(nil, s.UserData))}
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
	a.usersMu.Unlock()
}

// TerminateUser closes every connection signed in as userID with 4009 and returns how many.
func (h *Hub) TerminateUser(appID, userID string) int {
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

// Channels lists the app's occupied channels whose names start with prefix.
func (h *Hub) Channels(appID, prefix string) []herald.ChannelStat {
	if a := h.apps[appID]; a != nil {
		return a.channels.stats(prefix)
	}
	return nil
}

// Channel reports one channel; occupied is false when nobody is subscribed.
func (h *Hub) Channel(appID, name string) (stat herald.ChannelStat, occupied bool) {
	if a := h.apps[appID]; a != nil {
		return a.channels.stat(name)
	}
	return herald.ChannelStat{Name: name}, false
}

// Cached reports whether a cache channel holds an event.
func (h *Hub) Cached(appID, name string) bool {
	if a := h.apps[appID]; a != nil {
		return a.cache.has(name, h.now())
	}
	return false
}

// Users lists the user ids in a presence channel.
func (h *Hub) Users(appID, name string) []string {
	if a := h.apps[appID]; a != nil {
		if ch := a.channels.lookup(name); ch != nil {
			return ch.presence.users()
		}
	}
	return nil
}
