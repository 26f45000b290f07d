package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"log/slog"
	"time"

	"github.com/herald-rt/herald"
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
//
// The stream is made of parts, none of which reaches into the node, and the sender and the
// receiver not into each other (streamParts in layers_test.go says what each may reach):
//   - localShare (stream_local.go): this node's share as it changes, and its records;
//   - sender (stream_send.go): publishes those records in batches, one goroutine (run);
//   - receiver (stream_receive.go): reads the other nodes' batches, and drops the dead;
//   - peers (stream_peers.go): the other nodes' shares (share, stream_share.go), their totals,
//     and what their changes tell the listener;
//   - liveness (stream_liveness.go): whether this node has had its bus, and could hear;
//   - requests (stream_requests.go): what the sender is asked to send next, by the others.
type stream struct {
	heartbeat time.Duration
	req       *requests
	local     *localShare
	send      *sender
	recv      *receiver
	peers     *peers
	live      *liveness
}

// streamBus is what the stream uses of the bus.
type streamBus interface {
	sendBus
	Stats() herald.BrokerStats
}

// streamConfig is what the stream uses of its node.
type streamConfig struct {
	bus    streamBus
	apps   *apps        // the node's apps, which records name
	now    func() int64 // the engine's clock, ms
	behind func() bool  // whether this node is behind (pressure.go), said in its node record
	log    *slog.Logger

	heartbeat, timeout time.Duration // Config.Heartbeat and NodeTimeout
	release            string        // Config.Release
}

// stateKey is the internal bus key of the state stream (an empty app id is never an app's).
const stateKey = "state"

// usersChannel is the pseudo presence channel whose members, in the state stream, are the
// users signed in on a node. No client can name it: '#' starts only #server-to-user- channels.
const usersChannel = "#users"

// logEvery is the interval of the stream's rate-limited warnings.
const logEvery = 30 * time.Second

type chanKey struct{ app, channel string }

type memberKey struct{ app, channel, user string }

func newStream(c streamConfig) *stream {
	var b [8]byte
	_, _ = rand.Read(b[:])
	epoch := binary.LittleEndian.Uint64(b[:]) | 1 // this process's incarnation; its own batches come back with it
	req := &requests{wake: make(chan struct{}, 1)}
	live := &liveness{heartbeat: c.heartbeat, now: c.now, stats: c.bus.Stats, log: c.log}
	local := newLocalShare(c.apps, c.now, req.poke)
	p := &peers{byNode: map[string]*peer{}, totals: map[chanKey]int{}, epoch: epoch, reads: featuresRead,
		heartbeat: c.heartbeat, now: c.now, upSince: live.upSince, apps: c.apps}
	return &stream{heartbeat: c.heartbeat, req: req, local: local, peers: p, live: live,
		send: &sender{epoch: epoch, heartbeat: c.heartbeat, release: c.release, behind: c.behind, bus: c.bus, req: req, local: local},
		recv: &receiver{epoch: epoch, heartbeat: c.heartbeat, timeout: c.timeout.Milliseconds(), peers: p, req: req,
			apps: c.apps, now: c.now, upSince: live.upSince, log: c.log}}
}

// run streams this node's share until ctx is done, then says goodbye.
func (s *stream) run(ctx context.Context) {
	s.req.snapshot.Store(true)
	s.req.syncAll.Store(true)
	s.req.wantCache.Store(true)
	s.watchBus() // the bus's time starts now, not at the first tick (features.go)
	s.req.poke()
	t := time.NewTicker(s.heartbeat)
	defer t.Stop()
	for {
		beat := false
		select {
		case <-s.req.wake:
		case <-t.C:
			beat = true
			s.watchBus()
			s.live.awake()
			s.recv.expire()
			s.peers.recount()
		case <-ctx.Done():
			s.send.bye()
			return
		}
		s.send.send(ctx, beat)
	}
}

// watchBus notices the bus going and coming back: after a return, this node sends its whole
// share and asks for everyone's, since batches were lost both ways.
func (s *stream) watchBus() {
	if s.live.watchBus() {
		s.req.snapshot.Store(true)
		s.req.syncAll.Store(true)
	}
}

// What the node's apps tell the others (others): this node's records go to its share, the
// others' counts come from their shares.

func (s *stream) markSubs(app, channel string, edge, fired bool) {
	s.local.markSubs(app, channel, edge, fired)
}

func (s *stream) markMember(app, channel, user string, fired bool) {
	s.local.markMember(app, channel, user, fired)
}

func (s *stream) markUser(app, user string, in bool) { s.local.markUser(app, user, in) }

func (s *stream) remoteSubs(app, channel string) int { return s.peers.remoteSubs(app, channel) }

func (s *stream) remoteChannels(a *App, prefix string, stats []herald.ChannelStat) []herald.ChannelStat {
	return s.peers.remoteChannels(a, prefix, stats)
}

// What the node asks of its stream.

// listen makes l the listener the other nodes' changes are told to; call it before run.
func (s *stream) listen(l Listener) { s.peers.l = l }

// receive applies a batch node sent.
func (s *stream) receive(node string, payload []byte) { s.recv.receive(node, payload) }

// askAll asks every node for its share (a new app: they may have records of it).
func (s *stream) askAll() { s.req.want(&s.req.syncAll) }

// announce sends a batch soon even with nothing in it: this node's record changed.
func (s *stream) announce() { s.req.want(&s.req.announce) }

// reads is what this node announces it reads.
func (s *stream) reads() Feature { return s.send.announced() }

// features are the wire features in use: those this node and every live node it hears read.
func (s *stream) features() Feature { return Feature(s.peers.inUse.Load()) }

// behindPeer names a live node that announces it is behind; nil when none does.
func (s *stream) behindPeer() *string { return s.peers.behindPeer.Load() }

// behindCount is how many live nodes announce that they are behind.
func (s *stream) behindCount() int { return s.peers.behindCount() }

// refused counts the batches refused for an unknown state stream version.
func (s *stream) refused() uint64 { return s.recv.refused.Load() }

// nodes lists the live nodes this one hears, in no order.
func (s *stream) nodes() []NodeInfo { return s.peers.nodes() }
