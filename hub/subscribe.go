package hub

import (
	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// subscribe handles pusher:subscribe. Failures answer with pusher:subscription_error, which
// pusher-js reports on the channel, and leave the connection open.
func (h *Hub) subscribe(c *Conn, m pusher.Message) {
	s, err := pusher.DecodeSubscribe(m.Data)
	if err != nil {
		h.sendError(c, herald.CodeInvalid, herald.MessageOf(err))
		return
	}
	a, lim, name := c.app, c.app.app.Limits, s.Channel
	if err := pusher.ValidateChannelName(name, lim.MaxChannelNameLength); err != nil {
		h.subError(c, name, "InvalidChannel", herald.MessageOf(err), 4009)
		return
	}
	if c.subIndex(name) >= 0 {
		h.subError(c, name, "AlreadySubscribed", "already subscribed to "+name, 4009)
		return
	}
	if len(c.subs) >= lim.MaxChannelsPerConn {
		h.subError(c, name, "LimitReached", "too many channels on one connection", 4100)
		return
	}
	info := herald.Classify(name)
	var member herald.Member
	switch info.Kind {
	case herald.Private, herald.PrivateEncrypted:
		if !pusher.CheckChannelAuth(a.app, c.sid, name, "", s.Auth) {
			h.subError(c, name, "AuthError", "invalid signature for "+name, 401)
			return
		}
	case herald.Presence:
		if !pusher.CheckChannelAuth(a.app, c.sid, name, s.ChannelData, s.Auth) {
			h.subError(c, name, "AuthError", "invalid signature for "+name, 401)
			return
		}
		if member, err = pusher.DecodePresenceData(s.ChannelData); err != nil {
			h.subError(c, name, "InvalidChannelData", herald.MessageOf(err), 400)
			return
		}
		if len(member.UserID) > lim.MaxPresenceUserIDLength || len(member.Info) > lim.MaxPresenceMemberBytes {
			h.subError(c, name, "LimitReached", "presence member is too large", 4301)
			return
		}
	case herald.User:
		if !a.app.EnableUserAuthentication || c.user == "" || name[len(herald.UserChannelPrefix):] != c.user {
			h.subError(c, name, "AuthError", "sign in as this user before subscribing to "+name, 401)
			return
		}
	}

	ch, first := a.channels.acquire(name, info)
	edge := 0
	if first {
		edge = 1
	}
	h.subsChanged(a, name, edge)
	in := sub{ch: ch}
	if ch.bus != nil {
		if w, queued := h.wait(c, ch, member); queued {
			// Confirmed once this node's interest in the channel is on the bus.
			in.w = w
			c.subs = append(c.subs, in)
			if first {
				h.takeInterest(a, ch, func() { h.confirmAll(a, ch) })
			}
			return
		}
	}
	if !h.enter(c, ch, member) {
		h.forget(a, ch)
		h.subError(c, name, "LimitReached", "presence channel is full", 4100)
		return
	}
	if ch.presence != nil {
		in.w = &waiter{member: herald.Member{UserID: member.UserID}}
		in.w.state.Store(joined)
	}
	c.subs = append(c.subs, in)
}

// enter adds c to ch's subscribers and sends its subscription_succeeded (and a cache
// channel's last event, or its cache miss). It reports false, having done nothing, when ch
// is a full presence channel.
func (h *Hub) enter(c *Conn, ch *Channel, member herald.Member) bool {
	ok := true
	in := func(extra []byte) {
		if ch.presence != nil {
			ok = h.join(c, ch, member, extra)
			return
		}
		h.sendSub(c, ch, "", ws.TextFrame(pusher.AppendSubscriptionSucceeded(nil, ch.name, nil, false)), extra)
	}
	if ch.info.Cache {
		// Under the cache lock so the subscriber gets the last event exactly once.
		c.app.cache.with(ch.name, h.now(), func(last []byte) []byte {
			if last == nil {
				last = ws.TextFrame(pusher.AppendCacheMiss(nil, ch.name))
				if c.app.wants(herald.CacheMiss) {
					c.app.emit(&herald.Activity{Kind: herald.CacheMiss, Channel: ch.name, SocketID: c.sid})
				}
			}
			in(last)
			return nil
		})
	} else {
		in(nil)
	}
	return ok
}

// sendSub adds c to ch's subscribers on its worker, which then sends frame (and extra); user
// is the member c joined a presence channel as. The subscription is reported first, so that
// it is reported before the client can act on its confirmation.
func (h *Hub) sendSub(c *Conn, ch *Channel, user string, frame, extra []byte) {
	if c.app.wants(herald.Subscribed) {
		c.app.emit(&herald.Activity{Kind: herald.Subscribed, Channel: ch.name, SocketID: c.sid, UserID: user})
	}
	ch.wcount[c.w.idx].Add(1)
	c.w.inbox <- cmd{op: opSub, c: c, ch: ch, frame: frame, extra: extra}
	h.countChanged(c.app, ch.name) // after the opSub: the count reaches c too
}

func (h *Hub) subError(c *Conn, channel, typ, msg string, status int) {
	c.w.inbox <- cmd{op: opSend, c: c, frame: ws.TextFrame(pusher.AppendSubscriptionError(nil, channel, typ, msg, status))}
}

// join adds c to a presence channel as member. It reports false when the channel is full.
// The subscription and the member_added broadcast are sent under the presence lock, so every
// member learns of every other exactly once: from its snapshot or from member_added.
func (h *Hub) join(c *Conn, ch *Channel, mb herald.Member, extra []byte) bool {
	p := ch.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[mb.UserID]
	known := p.hasLocked(mb.UserID) // a member here or, in a cluster, on another node
	if !known && p.countLocked() >= c.app.app.Limits.MaxPresenceMembers {
		return false
	}
	if m == nil {
		m = &member{info: mb.Info}
		p.members[mb.UserID] = m
		if h.state != nil {
			p.ch = ch
		}
		h.memberChanged(c.app, ch.name, mb.UserID, true, !known)
	}
	m.conns++
	if !known {
		// Before the joiner's confirmation: once it has that, every other subscriber here
		// has been sent its member_added.
		h.dispatch(ch, ws.TextFrame(pusher.AppendMemberAdded(nil, ch.name, herald.Member{UserID: mb.UserID, Info: m.info})), c.num, nil, measure{})
	}
	h.sendSub(c, ch, mb.UserID, ws.TextFrame(pusher.AppendSubscriptionSucceeded(nil, ch.name, p.snapshotLocked(), true)), extra)
	return true
}

// unsubscribe leaves c.subs[i].
func (h *Hub) unsubscribe(c *Conn, i int) {
	s := c.subs[i]
	c.subs = append(c.subs[:i], c.subs[i+1:]...)
	c.w.inbox <- cmd{op: opUnsub, c: c, ch: s.ch}
	h.leave(c, s)
}

// leave undoes a subscription's shared state: the worker count, presence membership
// (member_removed when the user's last connection goes) and the channel's occupancy.
func (h *Hub) leave(c *Conn, s sub) {
	defer h.countChanged(c.app, s.ch.name) // once the count is down
	if !h.settle(c, s) {
		return // it never entered the channel
	}
	ch := s.ch
	ch.wcount[c.w.idx].Add(-1)
	if c.app.wants(herald.Unsubscribed) {
		c.app.emit(&herald.Activity{Kind: herald.Unsubscribed, Channel: ch.name, SocketID: c.sid, UserID: s.userID()})
	}
	if p := ch.presence; p != nil {
		p.mu.Lock()
		uid := s.userID()
		if m := p.members[uid]; m != nil {
			if m.conns--; m.conns == 0 {
				delete(p.members, uid)
				gone := !p.hasLocked(uid) // not a member on another node either
				h.memberChanged(c.app, ch.name, uid, false, gone)
				if gone {
					h.dispatch(ch, ws.TextFrame(pusher.AppendMemberRemoved(nil, ch.name, uid)), c.num, nil, measure{})
				}
			}
		}
		p.mu.Unlock()
	}
	h.forget(c.app, ch)
}
