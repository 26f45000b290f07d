package session

import (
	"strconv"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// subscribe handles pusher:subscribe. Failures answer with pusher:subscription_error, which
// pusher-js reports on the channel, and leave the connection open.
func (s *Server) subscribe(c *conn, m pusher.Message) {
	sm, err := pusher.DecodeSubscribe(m.Data)
	if err != nil {
		s.sendError(c, herald.CodeInvalid, herald.MessageOf(err))
		return
	}
	a, cfg, name := c.app, c.app.cur(), sm.Channel
	lim := cfg.Limits
	if err := pusher.ValidateChannelName(name, lim.MaxChannelNameLength); err != nil {
		s.subError(c, name, "InvalidChannel", herald.MessageOf(err), 4009)
		return
	}
	if sm.RecoverErr != nil {
		s.subError(c, name, "InvalidRecovery", herald.MessageOf(sm.RecoverErr), 400)
		return
	}
	if sm.Recover != nil {
		s.charge(c) // what its replay will cost it, made here on its reader
	}
	if c.subIndex(name) >= 0 {
		s.subError(c, name, "AlreadySubscribed", "already subscribed to "+name, 4009)
		return
	}
	if len(c.subs) >= lim.MaxChannelsPerConn {
		s.subError(c, name, "LimitReached", "too many channels on one connection", 4100)
		return
	}
	// Every attempt that gets this far costs a token, before the signature is checked: a
	// join and leave loop (member_added and member_removed to every other member, interest
	// on the bus) is bounded by it.
	if ok, wait := c.joins.Take(cfg.joins, s.now()*1e6); !ok {
		c.Counters().SubscribesLimited.Add(1)
		s.slowDown(c, wait)
		s.subError(c, name, "LimitReached", "subscription rejected: over the rate limit of "+
			strconv.Itoa(lim.MaxSubscriptionsPerSecond)+" subscriptions per second", 4301)
		return
	}
	info := herald.Classify(name)
	var member herald.Member
	switch info.Kind {
	case herald.Private, herald.PrivateEncrypted:
		if !pusher.CheckChannelAuth(cfg.App, c.ID(), name, "", sm.Auth) {
			s.subError(c, name, "AuthError", "invalid signature for "+name, 401)
			return
		}
	case herald.Presence:
		if !pusher.CheckChannelAuth(cfg.App, c.ID(), name, sm.ChannelData, sm.Auth) {
			s.subError(c, name, "AuthError", "invalid signature for "+name, 401)
			return
		}
		if member, err = pusher.DecodePresenceData(sm.ChannelData); err != nil {
			s.subError(c, name, "InvalidChannelData", herald.MessageOf(err), 400)
			return
		}
		if len(member.UserID) > lim.MaxPresenceUserIDLength || len(member.Info) > lim.MaxPresenceMemberBytes {
			s.subError(c, name, "LimitReached", "presence member is too large", 4301)
			return
		}
	case herald.User:
		if !cfg.EnableUserAuthentication || c.user() == "" || name[len(herald.UserChannelPrefix):] != c.user() {
			s.subError(c, name, "AuthError", "sign in as this user before subscribing to "+name, 401)
			return
		}
	}

	ch, first := s.st.Acquire(a.st, name, info)
	edge := 0
	if first {
		edge = 1
	}
	s.subsChanged(a, name, edge)
	in := sub{ch: ch}
	if g := ch.Gate(); !g.Open() {
		// Entered once this node's interest in the channel is on the bus.
		w := &waiter{s: s, c: c, ch: ch, member: member, since: sm.Recover}
		if g.Wait(w) {
			in.w = w
			c.subs = append(c.subs, in)
			return
		}
	}
	if sm.Recover != nil {
		// Entered once this node's copy of the channel's history has the client's position.
		w := &waiter{s: s, c: c, ch: ch, member: member, since: sm.Recover}
		w.late.Store(true)
		if s.st.CatchUp(a.st, ch, sm.Recover, w.caughtUp) {
			in.w = w
			c.subs = append(c.subs, in)
			return
		}
	}
	if !s.enter(c, ch, member, sm.Recover) {
		s.forget(a, ch)
		s.subError(c, name, "LimitReached", "presence channel is full", 4100)
		return
	}
	if info.Kind == herald.Presence {
		in.w = &waiter{member: herald.Member{UserID: member.UserID}}
		in.w.state.Store(joined)
	}
	c.subs = append(c.subs, in)
}

// enter adds c to ch's subscribers and sends its subscription_succeeded (and a cache
// channel's last event, or its cache miss; a history channel's recovered events and its
// position). since, when not nil, is the position c asks to recover from. It reports false,
// having done nothing, when ch is a full presence channel.
func (s *Server) enter(c *conn, ch *cluster.Channel, member herald.Member, since *herald.Position) bool {
	if since != nil && c.CloseCode() != 0 {
		since = nil // nothing replays for a connection that is closing
	}
	ok := true
	// Under the history lock, so the subscriber gets each event once: replayed or live.
	if c.app.st.Recover(ch, since, func(r cluster.Recovery) {
		extra, rep := s.replay(c, ch, r)
		ok = s.enterWith(c, ch, member, extra, rep)
	}) {
		return ok
	}
	if !ch.Info().Cache {
		return s.enterWith(c, ch, member, s.noHistory(ch.Name(), since), nil)
	}
	// Under the cache lock so the subscriber gets the last event exactly once.
	c.app.st.WithCache(ch.Name(), func(last []byte) {
		if last == nil {
			last = ws.TextFrame(pusher.AppendCacheMiss(nil, ch.Name()))
			if c.app.wants(herald.CacheMiss) {
				c.app.emit(&herald.Activity{Kind: herald.CacheMiss, Channel: ch.Name(), SocketID: c.ID()})
			}
		}
		if nh := s.noHistory(ch.Name(), since); nh != nil {
			last = append(append([]byte(nil), last...), nh...)
		}
		ok = s.enterWith(c, ch, member, last, nil)
	})
	return ok
}

// enterWith is enter with extra, a frame the subscriber gets after its subscription_succeeded
// (nil: none), or rep, a replay it gets there (nil: none).
func (s *Server) enterWith(c *conn, ch *cluster.Channel, member herald.Member, extra []byte, rep *fanout.Replay) bool {
	if ch.Info().Kind == herald.Presence {
		return s.join(c, ch, member, extra, rep)
	}
	s.sendSub(c, ch, "", ws.TextFrame(pusher.AppendSubscriptionSucceeded(nil, ch.Name(), nil, false)), extra, rep)
	return true
}

// sendSub adds c to ch's subscribers on its worker, which then sends frame (and extra, or the
// replay rep); user is the member c joined a presence channel as. The subscription is reported
// first, so that it is reported before the client can act on its confirmation.
func (s *Server) sendSub(c *conn, ch *cluster.Channel, user string, frame, extra []byte, rep *fanout.Replay) {
	if c.app.wants(herald.Subscribed) {
		c.app.emit(&herald.Activity{Kind: herald.Subscribed, Channel: ch.Name(), SocketID: c.ID(), UserID: user})
	}
	if rep != nil {
		s.eng.SubscribeReplay(&c.Conn, &ch.Channel, frame, rep)
	} else {
		s.eng.Subscribe(&c.Conn, &ch.Channel, frame, extra)
	}
	s.countChanged(c.app, ch.Name()) // after the subscribe: the count reaches c too
}

func (s *Server) subError(c *conn, channel, typ, msg string, status int) {
	s.eng.Send(&c.Conn, ws.TextFrame(pusher.AppendSubscriptionError(nil, channel, typ, msg, status)))
}

// join adds c to a presence channel as member. It reports false when the channel is full.
// The subscription and the member_added broadcast are sent under the presence lock, so every
// member learns of every other exactly once: from its snapshot or from member_added.
func (s *Server) join(c *conn, ch *cluster.Channel, mb herald.Member, extra []byte, rep *fanout.Replay) bool {
	a := c.app
	return a.st.Join(ch, mb, a.cur().Limits.MaxPresenceMembers, func(added bool, members []herald.Member) bool {
		reported := false
		if added {
			if a.wants(herald.MemberAdded) {
				reported = true
				a.emit(&herald.Activity{Kind: herald.MemberAdded, Channel: ch.Name(), UserID: mb.UserID})
			}
			// Before the joiner's confirmation: once it has that, every other subscriber
			// here has been sent its member_added.
			s.eng.Dispatch(&ch.Channel, ws.TextFrame(pusher.AppendMemberAdded(nil, ch.Name(), mb)), c.Num(), nil, noMeasure)
		}
		s.sendSub(c, ch, mb.UserID, ws.TextFrame(pusher.AppendSubscriptionSucceeded(nil, ch.Name(), members, true)), extra, rep)
		return reported
	})
}

// unsubscribe leaves c.subs[i].
func (s *Server) unsubscribe(c *conn, i int) {
	sb := c.subs[i]
	c.subs = append(c.subs[:i], c.subs[i+1:]...)
	s.leave(c, sb)
}

// leave undoes a subscription: c leaves the channel's subscribers on its worker, then its
// presence membership (member_removed when the user's last connection goes) and its share
// of the channel's occupancy.
func (s *Server) leave(c *conn, sb sub) {
	defer s.countChanged(c.app, sb.ch.Name()) // once the count is down
	if !s.settle(c, sb) {
		return // it never entered the channel
	}
	ch := sb.ch
	s.eng.Unsubscribe(&c.Conn, &ch.Channel)
	if c.app.wants(herald.Unsubscribed) {
		c.app.emit(&herald.Activity{Kind: herald.Unsubscribed, Channel: ch.Name(), SocketID: c.ID(), UserID: sb.userID()})
	}
	if ch.Info().Kind == herald.Presence {
		uid := sb.userID()
		c.app.st.Leave(ch, uid, func(removed bool) bool {
			reported := false
			if removed {
				if c.app.wants(herald.MemberRemoved) {
					reported = true
					c.app.emit(&herald.Activity{Kind: herald.MemberRemoved, Channel: ch.Name(), UserID: uid})
				}
				s.eng.Dispatch(&ch.Channel, ws.TextFrame(pusher.AppendMemberRemoved(nil, ch.Name(), uid)), c.Num(), nil, noMeasure)
			}
			return reported
		})
	}
	s.forget(c.app, ch)
}

// forget drops one subscription's reference to ch; the last one forgets the channel.
func (s *Server) forget(a *appState, ch *cluster.Channel) {
	edge := 0
	if s.st.Release(a.st, ch) {
		edge = -1
	}
	s.subsChanged(a, ch.Name(), edge)
}
