package session

import (
	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// signin handles pusher:signin. A bad signature closes the connection with 4009, as Pusher
// does; sign-in on an app without user authentication is refused with a 4009 error.
func (s *Server) signin(c *conn, m pusher.Message) {
	a := c.app
	if !a.cur().EnableUserAuthentication {
		s.sendError(c, herald.CodeForbidden, "user authentication is not enabled for this app")
		return
	}
	sm, err := pusher.DecodeSignin(m.Data)
	if err != nil {
		s.closeWith(c, herald.CodeUnauthorized, herald.MessageOf(err))
		return
	}
	if !pusher.CheckUserAuth(a.cur().App, c.ID(), sm.UserData, sm.Auth) {
		s.closeWith(c, herald.CodeUnauthorized, "invalid signin signature")
		return
	}
	ud, err := pusher.DecodeUserData(sm.UserData)
	if err != nil {
		s.closeWith(c, herald.CodeUnauthorized, herald.MessageOf(err))
		return
	}
	if c.user() != "" {
		s.forgetUser(c)
	}
	c.extra().user = ud.ID
	a.usersMu.Lock()
	first := len(a.users[ud.ID]) == 0
	a.users[ud.ID] = append(a.users[ud.ID], c)
	s.eng.Send(&c.Conn, ws.TextFrame(pusher.AppendSigninSuccess(nil, sm.UserData)))
	s.watchLocked(c, ud.Watchlist, first) // under the lock, after the signin_success
	a.usersMu.Unlock()
}

func (s *Server) forgetUser(c *conn) {
	a := c.app
	a.usersMu.Lock()
	list := a.users[c.user()]
	for i, x := range list {
		if x == c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(a.users, c.user())
	} else {
		a.users[c.user()] = list
	}
	s.unwatchLocked(c, len(list) == 0)
	a.usersMu.Unlock()
}

// TerminateUser closes every connection signed in as userID with 4009, on every node of a
// cluster, and returns how many it closed on this one.
func (s *Server) TerminateUser(appID, userID string) int {
	if a := s.app(appID); a != nil {
		s.st.Terminate(a.st, userID)
	}
	return s.closeUser(appID, userID)
}

// closeUser closes the connections signed in as userID on this node.
func (s *Server) closeUser(appID, userID string) int {
	a := s.app(appID)
	if a == nil {
		return 0
	}
	a.usersMu.Lock()
	list := append([]*conn(nil), a.users[userID]...)
	a.usersMu.Unlock()
	for _, c := range list {
		s.closeWith(c, herald.CodeUnauthorized, "connection terminated by the app")
	}
	return len(list)
}

// Channels lists the app's occupied channels whose names start with prefix: in a cluster,
// those occupied on any node, with the cluster's counts.
func (s *Server) Channels(appID, prefix string) []herald.ChannelStat {
	a := s.app(appID)
	if a == nil {
		return nil
	}
	return s.st.Channels(a.st, prefix)
}

// Channel reports one channel; occupied is false when nobody is subscribed (on any node).
func (s *Server) Channel(appID, name string) (stat herald.ChannelStat, occupied bool) {
	a := s.app(appID)
	if a == nil {
		return herald.ChannelStat{Name: name}, false
	}
	return s.st.Channel(a.st, name)
}

// Cached reports whether a cache channel holds an event.
func (s *Server) Cached(appID, name string) bool {
	if a := s.app(appID); a != nil {
		return a.st.Cached(name)
	}
	return false
}

// Users lists the user ids in a presence channel (on every node of a cluster).
func (s *Server) Users(appID, name string) []string {
	if a := s.app(appID); a != nil {
		return a.st.Users(name)
	}
	return nil
}
