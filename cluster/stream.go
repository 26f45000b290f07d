package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/lograte"
)

// stream makes a cluster one server to its users: every node keeps a copy of every
// other node's share of the state (its subscription count of each channel, its presence
// members) and answers from its own share plus those, so counts, member lists and presence
// events are the same on every node, without asking the others at query time.
//
// Each node streams its share on an internal bus key every node has interest in: batches of
// absolute records (a channel's count on the sender, whether a user is a member there) as
// they change, an empty batch every heartbeat, a full snapshot when another node asks for it
// (a new node, a node that missed a batch, a node back from a bus outage). A node not heard
// from for the node timeout, while this one has had its bus that long, is dead: its share is
// dropped, and each of its members that no other node has gets one member_removed. A node that
// restarts comes back with a new epoch and its share replaces the old one.
type stream struct {
	r         *Replicated
	epoch     uint64 // this process's incarnation; its own batches come back with it
	heartbeat time.Duration
	timeout   int64 // ms

	// announce asks the next send for a batch even with nothing in it: this node's record
	// changed (pressure.go). behindPeer names a live node that announces it is behind; nil
	// when none does.
	announce    atomic.Bool
	behindPeer  atomic.Pointer[string]
	behindNodes atomic.Int32
	// awake's: when the last heartbeat ran; starved counts the heartbeats that found this
	// node unable to hear.
	lastBeat   time.Time
	starved    atomic.Uint64
	starvedLog lograte.Limit

	applyMu sync.Mutex // serializes applying other nodes' batches and expiring nodes
	mu      sync.Mutex // guards peers and totals (REST reads them)
	peers   map[string]*peer
	totals  map[chanKey]int // other nodes' subscriptions, by channel

	// This node's share, as it changes: keys whose records are due.
	dmu          sync.Mutex
	dirtySubs    map[chanKey]struct{}
	dirtyMembers map[memberKey]struct{}
	// Whether this node fired the activity of its latest change of a key (a channel's count
	// to or from zero, a member's first join or last leave here), sent with its record so
	// that no other node fires it again (see activity.go).
	firedSubs    map[chanKey]bool
	firedMembers map[memberKey]bool
	wake         chan struct{}
	snapshot     atomic.Bool // send a snapshot next
	syncAll      atomic.Bool // ask every node for its snapshot next
	askOne       sync.Map    // epoch string -> struct{}: ask that node for its snapshot next
	cacheFor     sync.Map    // epoch string -> struct{}: send that node our cache channels' events
	wantCache    atomic.Bool // ask every node for its cache channels' events next

	// This node's signed-in users, by app (the members of usersChannel here).
	umu   sync.Mutex
	users map[string]map[string]struct{}

	// Sender goroutine only.
	seq        uint64
	busUp      bool
	reconnects uint64
	busUpSince atomic.Int64 // ms; 0 while the bus is down

	// Versions and features (features.go).
	legacy      bool          // tests: write batches as v0.1.0 did (no node record, no features)
	inUse       atomic.Uint64 // Feature: what this node and every live peer read
	refused     atomic.Uint64 // batches of an unknown state stream version
	refusedLog  lograte.Limit
	unknownLog  lograte.Limit // bus messages of an unknown envelope version
	unknownSeen uint64        // sender goroutine only
}

type chanKey struct{ app, channel string }

type memberKey struct{ app, channel, user string }

// peer is another node as this one knows it.
type peer struct {
	epoch, seq uint64
	lastSeen   int64 // ms
	askedAt    int64 // ms; when this node last asked it for a snapshot
	share      *share
	staging    *share     // a snapshot being received
	node       nodeRecord // from its latest batch; the zero value for v0.1.0 (version 1)
}

// share is one node's part of the state.
type share struct {
	subs    map[chanKey]int
	members map[chanKey]map[string][]byte
	// A snapshot being received: its records that say the sender did not fire their change.
	unfiredSubs    map[chanKey]bool
	unfiredMembers map[memberKey]bool
}

func newShare() *share {
	return &share{subs: map[chanKey]int{}, members: map[chanKey]map[string][]byte{}}
}

// stateKey is the internal bus key of the state stream (an empty app id is never an app's).
const stateKey = "state"

func newStream(r *Replicated) *stream {
	var b [8]byte
	_, _ = rand.Read(b[:])
	s := &stream{r: r, epoch: binary.LittleEndian.Uint64(b[:]) | 1, heartbeat: r.cfg.Heartbeat,
		timeout: r.cfg.NodeTimeout.Milliseconds(), peers: map[string]*peer{}, totals: map[chanKey]int{},
		dirtySubs: map[chanKey]struct{}{}, dirtyMembers: map[memberKey]struct{}{}, wake: make(chan struct{}, 1),
		firedSubs: map[chanKey]bool{}, firedMembers: map[memberKey]bool{}, users: map[string]map[string]struct{}{}}
	return s
}

func (s *stream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// markSubs and markMember queue a record of this node's share. edge says the channel's
// count here went to or from zero, and fired whether this node reported that change's
// activity; a member record is always such a change.
func (s *stream) markSubs(app, channel string, edge, fired bool) {
	k := chanKey{app, channel}
	s.dmu.Lock()
	s.dirtySubs[k] = struct{}{}
	if edge {
		s.firedSubs[k] = fired
	}
	s.dmu.Unlock()
	s.poke()
}

func (s *stream) markMember(app, channel, user string, fired bool) {
	k := memberKey{app, channel, user}
	s.dmu.Lock()
	s.dirtyMembers[k] = struct{}{}
	s.firedMembers[k] = fired
	s.dmu.Unlock()
	s.poke()
}

// usersChannel is the pseudo presence channel whose members, in the state stream, are the
// users signed in on a node. No client can name it: '#' starts only #server-to-user- channels.
const usersChannel = "#users"

// markUser records a user's first sign-in (in) or last sign-out here and queues its record.
func (s *stream) markUser(app, user string, in bool) {
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
func (s *stream) signedIn(app, user string) bool {
	s.umu.Lock()
	defer s.umu.Unlock()
	_, ok := s.users[app][user]
	return ok
}

// appendUserRecords appends a usersChannel member record for each user signed in on this
// node, for a snapshot of its share.
func (s *stream) appendUserRecords(app string, recs []stateRecord) []stateRecord {
	s.umu.Lock()
	defer s.umu.Unlock()
	for user := range s.users[app] {
		recs = append(recs, stateRecord{op: recMember, app: app, channel: usersChannel, user: user, present: true})
	}
	return recs
}

// remoteChannels adds to stats (this node's channels of a) the other nodes' channels whose
// names start with prefix, with the cluster's counts.
func (s *stream) remoteChannels(a *App, prefix string, stats []herald.ChannelStat) []herald.ChannelStat {
	at := make(map[string]int, len(stats))
	for i, st := range stats {
		at[st.Name] = i
	}
	s.eachRemote(a.id, prefix, func(name string, subs int) {
		if i, ok := at[name]; ok {
			stats[i].SubscriptionCount += subs
			return
		}
		stats = append(stats, herald.ChannelStat{Name: name, SubscriptionCount: subs, UserCount: a.table.pres.lookup(name).count()})
	})
	return stats
}

// run streams this node's share until ctx is done, then says goodbye.
func (s *stream) run(ctx context.Context) {
	s.snapshot.Store(true)
	s.syncAll.Store(true)
	s.wantCache.Store(true)
	s.watchBus() // the bus's time starts now, not at the first tick (features.go)
	s.poke()
	t := time.NewTicker(s.heartbeat)
	defer t.Stop()
	for {
		beat := false
		select {
		case <-s.wake:
		case <-t.C:
			beat = true
			s.watchBus()
			s.awake()
			s.expire()
			s.recount()
		case <-ctx.Done():
			s.bye()
			return
		}
		s.send(ctx, beat)
	}
}

// watchBus notices the bus going and coming back: after a return, this node sends its whole
// share and asks for everyone's, since batches were lost both ways.
func (s *stream) watchBus() {
	st := s.r.bus.Stats()
	up := st.Connected
	if up && (!s.busUp || st.Reconnects != s.reconnects) {
		s.busUpSince.Store(s.r.eng.Now())
		s.snapshot.Store(true)
		s.syncAll.Store(true)
	}
	if !up {
		s.busUpSince.Store(0)
	}
	s.busUp, s.reconnects = up, st.Reconnects
	s.watchVersions(st)
}

// send publishes what is due: a snapshot when asked for, else the dirty records; an empty
// batch when beat and nothing else went out.
func (s *stream) send(ctx context.Context, beat bool) {
	if !s.r.bus.Connected() {
		return // a snapshot follows the bus's return (watchBus)
	}
	var flags byte
	if s.syncAll.Swap(false) {
		flags |= flagSyncAll
	}
	if s.wantCache.Swap(false) {
		flags |= flagWantCache
	}
	var asks []string
	s.askOne.Range(func(k, _ any) bool {
		asks = append(asks, k.(string))
		s.askOne.Delete(k)
		return true
	})
	var recs []stateRecord
	snap := s.snapshot.Swap(false)
	if snap {
		d := s.takeDirty() // the snapshot has everything they say
		recs = s.snapshotRecords(d)
	} else {
		recs = s.dirtyRecords()
	}
	announce := s.announce.Swap(false)
	if len(recs) == 0 && flags == 0 && len(asks) == 0 && !snap && !beat && !announce {
		return
	}
	ok := s.publish(ctx, flags, snap, recs)
	for _, target := range asks {
		ok = ok && s.publishHeader(ctx, stateHeader{flags: flagSyncOne, target: target})
	}
	s.cacheFor.Range(func(k, _ any) bool {
		s.cacheFor.Delete(k)
		if recs := s.cacheRecords(k.(string)); ok && len(recs) > 0 {
			ok = s.publish(ctx, 0, false, recs)
		}
		return true
	})
	if !ok {
		s.snapshot.Store(true) // records were lost: the next batch is a snapshot
	}
}

// maxStateBatch bounds one batch's payload.
const maxStateBatch = 64 << 10

// publish sends recs as one batch or more; a snapshot is marked by its first and last batch.
func (s *stream) publish(ctx context.Context, flags byte, snap bool, recs []stateRecord) bool {
	first := true
	for {
		var body []byte
		n := 0
		for n < len(recs) && len(body) < maxStateBatch {
			body = appendStateRecord(body, recs[n])
			n++
		}
		recs = recs[n:]
		h := stateHeader{flags: flags}
		if snap && first {
			h.flags |= flagSnapStart
		}
		if snap && len(recs) == 0 {
			h.flags |= flagSnapEnd
		}
		if !s.publishBatch(ctx, h, body) {
			return false
		}
		first, flags = false, 0
		if len(recs) == 0 {
			return true
		}
	}
}

func (s *stream) publishHeader(ctx context.Context, h stateHeader) bool {
	return s.publishBatch(ctx, h, nil)
}

func (s *stream) publishBatch(ctx context.Context, h stateHeader, body []byte) bool {
	s.seq++
	h.epoch, h.seq = s.epoch, s.seq
	payload := append(appendStateHeader(nil, h), body...)
	if !s.legacy {
		payload = appendNodeRecord(payload, s.nodeRecord())
	}
	// Bounded: a bus queue full of events must not hold the heartbeat back for long.
	ctx, cancel := context.WithTimeout(ctx, s.heartbeat)
	defer cancel()
	return s.r.bus.Publish(ctx, herald.BusMessage{Kind: herald.BusState, Channel: stateKey, Payload: payload}) == nil
}

// bye tells the others this node leaves, so they drop its share at once.
func (s *stream) bye() {
	if !s.r.bus.Connected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.send(ctx, false) // the last leaves of the drain
	if s.publishHeader(ctx, stateHeader{flags: flagBye}) {
		_ = s.r.bus.Flush(ctx)
	}
}

// dirty is what takeDirty takes: the keys marked since the last batch, with their fired flags.
type dirty struct {
	subs         map[chanKey]struct{}
	members      map[memberKey]struct{}
	firedSubs    map[chanKey]bool
	firedMembers map[memberKey]bool
}

func (s *stream) takeDirty() dirty {
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
func (s *stream) dirtyRecords() []stateRecord {
	d := s.takeDirty()
	recs := make([]stateRecord, 0, len(d.subs)+len(d.members))
	for k := range d.subs {
		a := s.r.app(k.app)
		if a == nil {
			continue
		}
		recs = append(recs, stateRecord{op: recSubs, app: k.app, channel: k.channel, subs: a.table.localSubs(k.channel), fired: d.firedSubs[k]})
	}
	for k := range d.members {
		a := s.r.app(k.app)
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
func (s *stream) cacheRecords(target string) []stateRecord {
	var recs []stateRecord
	now := s.r.eng.Now()
	s.r.eachApp(func(id string, a *App) {
		a.cache.each(now, func(name string, frame []byte, at int64) {
			recs = append(recs, stateRecord{op: recCache, app: id, channel: name, target: target, age: now - at, info: frame})
		})
	})
	return recs
}

// snapshotRecords is this node's whole share. A record says it fired unless d (the changes
// not sent yet) says otherwise: changes that reach the others only through a snapshot fire
// nothing there (docs/webhooks.md).
func (s *stream) snapshotRecords(d dirty) []stateRecord {
	var recs []stateRecord
	flag := func(f bool, ok bool) bool { return f || !ok }
	s.r.eachApp(func(id string, a *App) {
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
		if a := s.r.app(k.app); a != nil && a.table.localSubs(k.channel) == 0 {
			f, ok := d.firedSubs[k]
			recs = append(recs, stateRecord{op: recSubs, app: k.app, channel: k.channel, fired: flag(f, ok)})
		}
	}
	for k := range d.members {
		a := s.r.app(k.app)
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

// receive applies a batch another node sent.
func (s *stream) receive(node string, payload []byte) {
	r := stateReader{b: payload}
	h := r.header()
	if r.err != nil || h.epoch == s.epoch {
		return // malformed, or this node's own batch back from the bus
	}
	nr, found, err := batchNode(r)
	switch {
	case err != nil:
		return // malformed
	case !found:
		nr = nodeRecord{version: 1} // v0.1.0: no version, no features
	case nr.version < 2:
		return // a node record is version 2 or later: malformed
	case nr.version > stateVersion:
		s.refuse(node, nr.version) // a later release's records: not to be misread
		return
	}
	me := strconv.FormatUint(s.epoch, 10)
	if h.flags&flagSyncAll != 0 || h.flags&flagSyncOne != 0 && h.target == me {
		s.snapshot.Store(true)
		s.poke()
	}
	if h.flags&flagWantCache != 0 {
		s.cacheFor.Store(strconv.FormatUint(h.epoch, 10), struct{}{})
		s.poke()
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	now := s.r.eng.Now()
	s.mu.Lock()
	p := s.peers[node]
	s.mu.Unlock()
	if p != nil && p.epoch != h.epoch {
		s.drop(node, p) // restarted: its new share replaces the old one
		p = nil
	}
	if p == nil {
		p = &peer{epoch: h.epoch, share: newShare(), seq: h.seq - 1}
		s.mu.Lock()
		s.peers[node] = p
		s.mu.Unlock()
		if h.flags&flagSnapStart == 0 {
			s.ask(p, now)
		}
	}
	p.lastSeen = now
	if p.node != nr {
		s.mu.Lock()
		p.node = nr
		s.recountLocked()
		s.mu.Unlock()
	}
	if h.flags&flagBye != 0 {
		s.drop(node, p)
		return
	}
	if h.seq != p.seq+1 {
		s.ask(p, now) // a batch was lost: its snapshot puts right what it said
		p.staging = nil
	}
	p.seq = h.seq
	if h.flags&flagSnapStart != 0 {
		p.staging = newShare()
	}
	for {
		rec, ok := r.next()
		if !ok {
			break
		}
		if rec.op >= recNode {
			continue // read above, or a later release's extension record
		}
		a := s.r.app(rec.app)
		if a == nil {
			continue
		}
		if rec.op == recCache {
			if rec.target == me {
				a.cache.keep(rec.channel, rec.info, now-rec.age, now)
			}
			continue
		}
		if p.staging != nil {
			p.staging.stage(rec)
		} else {
			s.apply(p.share, rec)
		}
	}
	if h.flags&flagSnapEnd != 0 && p.staging != nil {
		s.replace(p, p.staging, false)
		p.staging = nil
	}
}

// ask asks p for its snapshot, at most once a heartbeat.
func (s *stream) ask(p *peer, now int64) {
	if now-p.askedAt < s.heartbeat.Milliseconds() && p.askedAt != 0 {
		return
	}
	p.askedAt = now
	s.askOne.Store(strconv.FormatUint(p.epoch, 10), struct{}{})
	s.poke()
}

// stage records rec in a snapshot being received, with whether its sender fired it.
func (sh *share) stage(rec stateRecord) {
	if !rec.fired {
		if sh.unfiredSubs == nil {
			sh.unfiredSubs, sh.unfiredMembers = map[chanKey]bool{}, map[memberKey]bool{}
		}
		if rec.op == recSubs {
			sh.unfiredSubs[chanKey{rec.app, rec.channel}] = true
		} else {
			sh.unfiredMembers[memberKey{rec.app, rec.channel, rec.user}] = true
		}
	}
	sh.set(rec)
}

// set records rec in a share.
func (sh *share) set(rec stateRecord) {
	k := chanKey{rec.app, rec.channel}
	switch rec.op {
	case recSubs:
		if rec.subs > 0 {
			sh.subs[k] = rec.subs
		} else {
			delete(sh.subs, k)
		}
	case recMember:
		m := sh.members[k]
		if rec.present {
			if m == nil {
				m = map[string][]byte{}
				sh.members[k] = m
			}
			m[rec.user] = rec.info
		} else if m != nil {
			delete(m, rec.user)
			if len(m) == 0 {
				delete(sh.members, k)
			}
		}
	}
}

// apply records rec in the live share sh of a node, updating the totals and the presence
// channels, whose local subscribers get member_added / member_removed when a user becomes or
// stops being a member anywhere.
func (s *stream) apply(sh *share, rec stateRecord) {
	k := chanKey{rec.app, rec.channel}
	switch rec.op {
	case recSubs:
		s.mu.Lock()
		old := sh.subs[k]
		if rec.subs > 0 {
			sh.subs[k] = rec.subs
		} else {
			delete(sh.subs, k)
		}
		before := s.totals[k]
		after := before + rec.subs - old
		if after > 0 {
			s.totals[k] = after
		} else {
			delete(s.totals, k)
		}
		fire := !rec.fired && (before > 0) != (after > 0) && s.lowestLocked()
		s.mu.Unlock()
		if a := s.r.app(rec.app); fire && (a == nil || a.table.localSubs(rec.channel) == 0) {
			kind := herald.ChannelOccupied
			if after == 0 {
				kind = herald.ChannelVacated
			}
			if s.r.l.Wants(rec.app, kind) {
				s.r.l.Emit(rec.app, &herald.Activity{Kind: kind, Channel: rec.channel})
			}
		}
		if rec.subs != old {
			s.r.l.CountChanged(rec.app, rec.channel)
		}
	case recMember:
		_, was := sh.members[k][rec.user]
		if was == rec.present {
			return
		}
		sh.set(rec)
		if rec.channel == usersChannel {
			s.r.l.RemoteUser(rec.app, rec.user, rec.present)
			return
		}
		// An app this node has not added yet (created while the nodes run, not yet known
		// here) has no presence table to keep the member in.
		if a := s.r.app(rec.app); a != nil {
			s.remoteMember(a, rec.channel, rec.user, rec.info, rec.present, rec.fired)
		}
	}
}

// lowestLocked reports whether this node has the lowest epoch of the live nodes it knows:
// the one that fires the activity of a change no other node fired. Call with s.mu held.
func (s *stream) lowestLocked() bool {
	for _, p := range s.peers {
		if p.epoch < s.epoch {
			return false
		}
	}
	return true
}

// remoteMember counts one other node more (present) or less with user as a member of the
// presence channel, and tells the local subscribers when that changes whether the user is a
// member anywhere.
//
// fired is whether the node whose record this is reported the change's activity; when it did
// not and the change is one here, the node with the lowest epoch reports it.
func (s *stream) remoteMember(a *App, channel, user string, info []byte, present, fired bool) {
	t := a.table.pres
	p := t.lockRemote(channel)
	before := p.hasLocked(user)
	if p.remote == nil {
		p.remote = map[string]*remoteMember{}
	}
	r := p.remote[user]
	if present {
		if r == nil {
			r = &remoteMember{info: info}
			p.remote[user] = r
		}
		r.nodes++
	} else if r != nil {
		if r.nodes--; r.nodes <= 0 {
			delete(p.remote, user)
		}
	}
	after := p.hasLocked(user)
	if before != after && !fired {
		kind := herald.MemberRemoved
		if after {
			kind = herald.MemberAdded
		}
		if s.r.l.Wants(a.id, kind) {
			s.mu.Lock()
			lowest := s.lowestLocked()
			s.mu.Unlock()
			if lowest {
				s.r.l.Emit(a.id, &herald.Activity{Kind: kind, Channel: channel, UserID: user})
			}
		}
	}
	if before != after && p.ch != nil {
		if after {
			s.r.l.MemberAdded(a.id, p.ch, herald.Member{UserID: user, Info: r.info})
		} else {
			s.r.l.MemberRemoved(a.id, p.ch, user)
		}
	}
	p.mu.Unlock()
	t.tidy(p)
}

// replace makes next p's share, applying only the differences. Each says it fired as the
// snapshot's record of its key did (a record that is not there fired), except when p is
// dropped (gone: the lowest live node fires its removals).
func (s *stream) replace(p *peer, next *share, dropped bool) {
	old := p.share
	for k := range old.subs {
		if _, ok := next.subs[k]; !ok {
			s.apply(old, stateRecord{op: recSubs, app: k.app, channel: k.channel, fired: !dropped && !next.unfiredSubs[k]})
		}
	}
	for k, n := range next.subs {
		s.apply(old, stateRecord{op: recSubs, app: k.app, channel: k.channel, subs: n, fired: !next.unfiredSubs[k]})
	}
	for k, m := range old.members {
		for user := range m {
			if _, ok := next.members[k][user]; !ok {
				s.apply(old, stateRecord{op: recMember, app: k.app, channel: k.channel, user: user,
					fired: !dropped && !next.unfiredMembers[memberKey{k.app, k.channel, user}]})
			}
		}
	}
	for k, m := range next.members {
		for user, info := range m {
			s.apply(old, stateRecord{op: recMember, app: k.app, channel: k.channel, user: user, present: true, info: info,
				fired: !next.unfiredMembers[memberKey{k.app, k.channel, user}]})
		}
	}
}

// drop forgets a node: its share leaves every count and member list (it is no longer among
// the live nodes then, for lowestLocked). Called with applyMu.
func (s *stream) drop(node string, p *peer) {
	s.mu.Lock()
	if s.peers[node] == p {
		delete(s.peers, node)
	}
	s.recountLocked()
	s.mu.Unlock()
	s.replace(p, newShare(), true)
}

// awake notices that this node could not hear the others for a while though they may have
// spoken: its heartbeat came more than two heartbeats after the one before (the process was
// paused, or starved of CPU), or messages arrived from the bus for a whole heartbeat without
// its delivery ever catching up (its queue never ran empty: the others' batches wait in it).
// The bus's time then starts again, as after an outage, so that no node is declared dead
// for a silence this node made (watchBus, expire).
func (s *stream) awake() {
	now := time.Now()
	last := s.lastBeat
	s.lastBeat = now
	st := s.r.bus.Stats()
	behind := st.QueueCap > 0 && st.Queued >= st.QueueCap/4
	late := !last.IsZero() && now.Sub(last) > 2*s.heartbeat
	if !late && !behind {
		return
	}
	if s.busUpSince.Load() != 0 {
		s.busUpSince.Store(s.r.eng.Now())
	}
	s.starved.Add(1)
	if s.starvedLog.Due(s.r.eng.Now(), logEvery.Milliseconds()) {
		s.r.log.Warn("cluster: this node could not keep up with the bus (paused, starved of CPU, or its queue never emptied): no node is declared dead for a node timeout",
			"late_by", now.Sub(last)-s.heartbeat, "queue_never_emptied", behind)
	}
}

// expire drops the nodes not heard from for the timeout, if this node has had its bus that
// long, and has kept up with it: while its own bus is down or just back, or while this node
// was itself too starved to hear (awake, below), silence proves nothing.
func (s *stream) expire() {
	now := s.r.eng.Now()
	up := s.busUpSince.Load()
	if up == 0 || now-up < s.timeout {
		return
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	var dead []string
	for node, p := range s.peers {
		if now-p.lastSeen >= s.timeout {
			dead = append(dead, node)
		}
	}
	s.mu.Unlock()
	for _, node := range dead {
		s.mu.Lock()
		p := s.peers[node]
		s.mu.Unlock()
		s.r.log.Warn("cluster node gone: dropping its connections from counts and presence", "node_id", node,
			"silent_for", (time.Duration(now-p.lastSeen) * time.Millisecond).String())
		s.drop(node, p)
	}
}

// remoteSubs is the other nodes' subscription count of a channel.
func (s *stream) remoteSubs(app, channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totals[chanKey{app, channel}]
}

// eachRemote calls f for each channel of app with subscribers on other nodes whose name
// starts with prefix.
func (s *stream) eachRemote(app, prefix string, f func(name string, subs int)) {
	s.mu.Lock()
	type kv struct {
		name string
		subs int
	}
	var list []kv
	for k, n := range s.totals {
		if k.app == app && len(k.channel) >= len(prefix) && k.channel[:len(prefix)] == prefix {
			list = append(list, kv{k.channel, n})
		}
	}
	s.mu.Unlock()
	for _, x := range list {
		f(x.name, x.subs)
	}
}
