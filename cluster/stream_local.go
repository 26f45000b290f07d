package cluster

import "sync"

// localShare is this node's share as it changes: the keys whose records are due, and the
// records the sender sends of them, of the whole share (a snapshot), and of the cache
// channels' events.
type localShare struct {
	apps *apps
	now  func() int64 // ms
	wake func()       // the sender has records to send

	dmu          sync.Mutex
	dirtySubs    map[chanKey]struct{}
	dirtyMembers map[memberKey]struct{}
	// Whether this node fired the activity of its latest change of a key (a channel's count
	// to or from zero, a member's first join or last leave here), sent with its record so
	// that no other node fires it again (see activity.go).
	firedSubs    map[chanKey]bool
	firedMembers map[memberKey]bool

	// This node's signed-in users, by app (the members of usersChannel here).
	umu   sync.Mutex
	users map[string]map[string]struct{}
}

func newLocalShare(a *apps, now func() int64, wake func()) *localShare {
	return &localShare{apps: a, now: now, wake: wake,
		dirtySubs: map[chanKey]struct{}{}, dirtyMembers: map[memberKey]struct{}{},
		firedSubs: map[chanKey]bool{}, firedMembers: map[memberKey]bool{}, users: map[string]map[string]struct{}{}}
}

// markSubs and markMember queue a record of this node's share. edge says the channel's
// count here went to or from zero, and fired whether this node reported that change's
// activity; a member record is always such a change.
func (s *localShare) markSubs(app, channel string, edge, fired bool) {
	k := chanKey{app, channel}
	s.dmu.Lock()
	s.dirtySubs[k] = struct{}{}
	if edge {
		s.firedSubs[k] = fired
	}
	s.dmu.Unlock()
	s.wake()
}

func (s *localShare) markMember(app, channel, user string, fired bool) {
	k := memberKey{app, channel, user}
	s.dmu.Lock()
	s.dirtyMembers[k] = struct{}{}
	s.firedMembers[k] = fired
	s.dmu.Unlock()
	s.wake()
}

// markUser records a user's first sign-in (in) or last sign-out here and queues its record.
func (s *localShare) markUser(app, user string, in bool) {
	s.umu.Lock()
	set := s.users[app]
	if in {
		if set == nil {
			set = map[string]struct{}{}
			s.users[app] = set
		}
		set[user] = struct{}{}
	} else {
		delete(set, user)
	}
	s.umu.Unlock()
	s.markMember(app, usersChannel, user, true)
}

// signedIn reports whether a connection of this node is signed in as user.
func (s *localShare) signedIn(app, user string) bool {
	s.umu.Lock()
	defer s.umu.Unlock()
	_, ok := s.users[app][user]
	return ok
}

// appendUserRecords appends a usersChannel member record for each user signed in on this
// node, for a snapshot of its share.
func (s *localShare) appendUserRecords(app string, recs []stateRecord) []stateRecord {
	s.umu.Lock()
	defer s.umu.Unlock()
	for user := range s.users[app] {
		recs = append(recs, stateRecord{op: recMember, app: app, channel: usersChannel, user: user, present: true})
	}
	return recs
}

// dirty is what takeDirty takes: the keys marked since the last batch, with their fired flags.
type dirty struct {
	subs         map[chanKey]struct{}
	members      map[memberKey]struct{}
	firedSubs    map[chanKey]bool
	firedMembers map[memberKey]bool
}

func (s *localShare) takeDirty() dirty {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	var d dirty
	if len(s.dirtySubs) > 0 {
		d.subs, s.dirtySubs = s.dirtySubs, map[chanKey]struct{}{}
	}
	if len(s.dirtyMembers) > 0 {
		d.members, s.dirtyMembers = s.dirtyMembers, map[memberKey]struct{}{}
	}
	if len(s.firedSubs) > 0 {
		d.firedSubs, s.firedSubs = s.firedSubs, map[chanKey]bool{}
	}
	if len(s.firedMembers) > 0 {
		d.firedMembers, s.firedMembers = s.firedMembers, map[memberKey]bool{}
	}
	return d
}

// dirtyRecords reads the current value of every key marked since the last batch.
func (s *localShare) dirtyRecords() []stateRecord {
	d := s.takeDirty()
	recs := make([]stateRecord, 0, len(d.subs)+len(d.members))
	for k := range d.subs {
		a := s.apps.app(k.app)
		if a == nil {
			continue
		}
		recs = append(recs, stateRecord{op: recSubs, app: k.app, channel: k.channel, subs: a.table.localSubs(k.channel), fired: d.firedSubs[k]})
	}
	for k := range d.members {
		a := s.apps.app(k.app)
		if a == nil {
			continue
		}
		r := stateRecord{op: recMember, app: k.app, channel: k.channel, user: k.user, fired: d.firedMembers[k]}
		if k.channel == usersChannel {
			r.present = s.signedIn(k.app, k.user)
		} else if p := a.table.pres.lookup(k.channel); p != nil {
			p.mu.Lock()
			if m := p.members[k.user]; m != nil {
				r.present, r.info = true, m.info
			}
			p.mu.Unlock()
		}
		recs = append(recs, r)
	}
	return recs
}

// cacheRecords are this node's cache channels' events, for the node whose epoch is target.
func (s *localShare) cacheRecords(target string) []stateRecord {
	var recs []stateRecord
	now := s.now()
	s.apps.eachApp(func(id string, a *App) {
		a.cache.each(now, func(name string, frame []byte, at int64) {
			recs = append(recs, stateRecord{op: recCache, app: id, channel: name, target: target, age: now - at, info: frame})
		})
	})
	return recs
}

// snapshotRecords is this node's whole share. A record says it fired unless d (the changes
// not sent yet) says otherwise: changes that reach the others only through a snapshot fire
// nothing there (docs/webhooks.md).
func (s *localShare) snapshotRecords(d dirty) []stateRecord {
	var recs []stateRecord
	flag := func(f bool, ok bool) bool { return f || !ok }
	s.apps.eachApp(func(id string, a *App) {
		a.table.eachLocal(func(name string, subs int) {
			f, ok := d.firedSubs[chanKey{id, name}]
			recs = append(recs, stateRecord{op: recSubs, app: id, channel: name, subs: subs, fired: flag(f, ok)})
		})
		a.table.pres.each("", func(name string, p *presence) {
			p.mu.Lock()
			for user, m := range p.members {
				f, ok := d.firedMembers[memberKey{id, name, user}]
				recs = append(recs, stateRecord{op: recMember, app: id, channel: name, user: user, present: true, info: m.info, fired: flag(f, ok)})
			}
			p.mu.Unlock()
		})
		recs = s.appendUserRecords(id, recs)
	})
	// The keys that changed since the last batch and are no longer in the share: their
	// records carry whether this node fired them.
	for k := range d.subs {
		if a := s.apps.app(k.app); a != nil && a.table.localSubs(k.channel) == 0 {
			f, ok := d.firedSubs[k]
			recs = append(recs, stateRecord{op: recSubs, app: k.app, channel: k.channel, fired: flag(f, ok)})
		}
	}
	for k := range d.members {
		a := s.apps.app(k.app)
		if a == nil {
			continue
		}
		present := false
		if k.channel == usersChannel {
			present = s.signedIn(k.app, k.user)
		} else if p := a.table.pres.lookup(k.channel); p != nil {
			p.mu.Lock()
			present = p.members[k.user] != nil
			p.mu.Unlock()
		}
		if !present {
			f, ok := d.firedMembers[k]
			recs = append(recs, stateRecord{op: recMember, app: k.app, channel: k.channel, user: k.user, fired: flag(f, ok)})
		}
	}
	return recs
}
