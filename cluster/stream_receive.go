package cluster

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/internal/lograte"
)

// receiver reads the other nodes' batches into their shares (peers), asks for a snapshot
// when one was lost (requests), and drops the nodes not heard from for the node timeout.
type receiver struct {
	epoch     uint64 // this node's: its own batches come back from the bus
	heartbeat time.Duration
	timeout   int64 // ms
	peers     *peers
	req       *requests
	apps      *apps
	now       func() int64 // ms
	upSince   func() int64 // when this node's bus came up, ms; 0 while it is down (liveness)
	log       *slog.Logger

	applyMu sync.Mutex // serializes applying other nodes' batches and expiring nodes

	refused    atomic.Uint64 // batches of an unknown state stream version
	refusedLog lograte.Limit
}

// receive applies a batch another node sent.
func (s *receiver) receive(node string, payload []byte) {
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
		s.req.want(&s.req.snapshot)
	}
	if h.flags&flagWantCache != 0 {
		s.req.cacheTo(h.epoch)
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	now := s.now()
	p := s.peers.get(node)
	if p != nil && p.epoch != h.epoch {
		s.peers.drop(node, p) // restarted: its new share replaces the old one
		p = nil
	}
	if p == nil {
		p = &peer{epoch: h.epoch, share: newShare(), seq: h.seq - 1}
		s.peers.add(node, p)
		if h.flags&flagSnapStart == 0 {
			s.ask(p, now)
		}
	}
	p.lastSeen = now
	s.peers.setRecord(p, nr)
	if h.flags&flagBye != 0 {
		s.peers.drop(node, p)
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
		a := s.apps.app(rec.app)
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
			s.peers.apply(p.share, rec)
		}
	}
	if h.flags&flagSnapEnd != 0 && p.staging != nil {
		s.peers.replace(p, p.staging, false)
		p.staging = nil
	}
}

// ask asks p for its snapshot, at most once a heartbeat.
func (s *receiver) ask(p *peer, now int64) {
	if now-p.askedAt < s.heartbeat.Milliseconds() && p.askedAt != 0 {
		return
	}
	p.askedAt = now
	s.req.askFor(p.epoch)
}

// refuse counts and logs (rate-limited) a batch of a state stream version this node does
// not know.
func (s *receiver) refuse(node string, version int) {
	n := s.refused.Add(1)
	if s.refusedLog.Due(s.now(), logEvery.Milliseconds()) {
		s.log.Warn("cluster: state stream batch of an unknown version refused: the node runs a later release",
			"node_id", node, "version", version, "refused_total", n)
	}
}

// expire drops the nodes not heard from for the timeout, if this node has had its bus that
// long, and has kept up with it: while its own bus is down or just back, or while this node
// was itself too starved to hear (liveness.awake), silence proves nothing.
func (s *receiver) expire() {
	now := s.now()
	up := s.upSince()
	if up == 0 || now-up < s.timeout {
		return
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	for _, node := range s.peers.silent(now, s.timeout) {
		p := s.peers.get(node)
		s.log.Warn("cluster node gone: dropping its connections from counts and presence", "node_id", node,
			"silent_for", (time.Duration(now-p.lastSeen) * time.Millisecond).String())
		s.peers.drop(node, p)
	}
}
