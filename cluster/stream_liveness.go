package cluster

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/lograte"
)

// liveness follows, from the stream's goroutine, whether this node could hear the others:
// since when it has had its bus without interruption (upSince), which it restarts when the
// node was paused or starved (awake), so that no node is declared dead for a silence this
// node made (receiver.expire) and no feature is used before every live node was heard
// (peers.recountLocked). It also logs the bus messages of an unknown wire version.
type liveness struct {
	heartbeat time.Duration
	now       func() int64 // ms
	stats     func() herald.BrokerStats
	log       *slog.Logger

	busUpSince atomic.Int64 // ms; 0 while the bus is down
	// The stream's goroutine only.
	busUp      bool
	reconnects uint64
	lastBeat   time.Time // when the last heartbeat ran
	// starved counts the heartbeats that found this node unable to hear.
	starved    atomic.Uint64
	starvedLog lograte.Limit

	unknownLog  lograte.Limit // bus messages of an unknown envelope version
	unknownSeen uint64
}

// upSince is when this node's bus came up (restarted by awake), ms; 0 while it is down.
func (s *liveness) upSince() int64 { return s.busUpSince.Load() }

// watchBus notices the bus going and coming back: back reports that it is up after being
// down or reconnecting, when batches were lost both ways.
func (s *liveness) watchBus() (back bool) {
	st := s.stats()
	up := st.Connected
	if up && (!s.busUp || st.Reconnects != s.reconnects) {
		s.busUpSince.Store(s.now())
		back = true
	}
	if !up {
		s.busUpSince.Store(0)
	}
	s.busUp, s.reconnects = up, st.Reconnects
	s.watchVersions(st)
	return back
}

// awake notices that this node could not hear the others for a while though they may have
// spoken: its heartbeat came more than two heartbeats after the one before (the process was
// paused, or starved of CPU), or messages arrived from the bus for a whole heartbeat without
// its delivery ever catching up (its queue never ran empty: the others' batches wait in it).
// The bus's time then starts again, as after an outage, so that no node is declared dead
// for a silence this node made (watchBus, receiver.expire).
func (s *liveness) awake() {
	now := time.Now()
	last := s.lastBeat
	s.lastBeat = now
	st := s.stats()
	behind := st.QueueCap > 0 && st.Queued >= st.QueueCap/4
	late := !last.IsZero() && now.Sub(last) > 2*s.heartbeat
	if !late && !behind {
		return
	}
	if s.busUpSince.Load() != 0 {
		s.busUpSince.Store(s.now())
	}
	s.starved.Add(1)
	if s.starvedLog.Due(s.now(), logEvery.Milliseconds()) {
		s.log.Warn("cluster: this node could not keep up with the bus (paused, starved of CPU, or its queue never emptied): no node is declared dead for a node timeout",
			"late_by", now.Sub(last)-s.heartbeat, "queue_never_emptied", behind)
	}
}

// watchVersions logs (rate-limited) the bus messages of an unknown envelope version the bus
// refused since the last call, naming the latest one's sender and version.
func (s *liveness) watchVersions(st herald.BrokerStats) {
	if st.UnknownVersion == s.unknownSeen {
		return
	}
	if s.unknownLog.Due(s.now(), logEvery.Milliseconds()) {
		s.log.Warn("cluster: bus messages of an unknown wire version refused: a node runs a later release",
			"node_id", st.LastUnknownVersion.Node, "version", st.LastUnknownVersion.Version,
			"refused", st.UnknownVersion-s.unknownSeen, "refused_total", st.UnknownVersion)
		s.unknownSeen = st.UnknownVersion
	}
}
