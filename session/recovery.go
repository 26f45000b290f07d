package session

import (
	"context"
	"sync/atomic"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// ReasonRateLimited is why a recovery failed that the replay budget refused
// (replaybudget.go).
const ReasonRateLimited = "rate_limited"

// OutcomeBehind is the outcome of a recovery request not answered: the node's copy of the
// channel's history did not reach the client's position in time (cluster.Config.CatchUpWait), and
// the connection was closed (4200) for the client to recover again (waiter.caughtUp).
const OutcomeBehind = "behind"

// RecoveryReasons are the outcomes a recovery request can have, in the order of
// Server.Recoveries: recovered, then each reason it failed for (docs/protocol.md), then
// OutcomeBehind.
var RecoveryReasons = [...]string{"recovered", cluster.ReasonEpochChanged, cluster.ReasonTooOld,
	cluster.ReasonAhead, cluster.ReasonNoHistory, cluster.ReasonUnavailable, cluster.ReasonLost, ReasonRateLimited,
	OutcomeBehind}

// recoveries counts recovery requests by outcome, indexed as RecoveryReasons.
type recoveries [len(RecoveryReasons)]atomic.Int64

func (r *recoveries) count(recovered bool, reason string) {
	if recovered {
		r[0].Add(1)
		return
	}
	for i, x := range RecoveryReasons[1:] {
		if x == reason {
			r[i+1].Add(1)
			return
		}
	}
}

// Recoveries returns the node's recovery requests so far by outcome, indexed as
// RecoveryReasons.
func (s *Server) Recoveries() [len(RecoveryReasons)]int64 {
	var out [len(RecoveryReasons)]int64
	for i := range s.recoveries {
		out[i] = s.recoveries[i].Load()
	}
	return out
}

// HistoryStats returns what this node's copies of histories met in a cluster (all zero on a
// single node).
func (s *Server) HistoryStats() (gapsRepaired, gapsLost, duplicates int64) {
	st := s.st.HistoryStats()
	return st.GapsRepaired.Load(), st.GapsLost.Load(), st.Duplicates.Load()
}

// RollbackStats returns how many times this node found the cluster's history store gone back
// within an epoch (it lost acknowledged events) and ended the epoch, and how many new epochs
// its copies took while their subscribers had positions of the old one (all zero on a single
// node).
func (s *Server) RollbackStats() (rollbacks, epochsLost int64) {
	st := s.st.HistoryStats()
	return st.Rollbacks.Load(), st.EpochsLost.Load()
}

// KeyStats returns the node's counters of idempotency keys.
func (s *Server) KeyStats() cluster.KeyStats { return s.st.KeyStats() }

// HistoryLoads is how many times this node read a channel's whole history from the cluster's
// store into its copy (0 on a single node).
func (s *Server) HistoryLoads() int64 { return s.st.HistoryStats().Loads.Load() }

// MissedChannels is how many times this node closed the subscribers of a channel without
// history because it dropped events of it from the bus (it could not keep up).
func (s *Server) MissedChannels() int64 { return s.st.HistoryStats().Missed.Load() }

// replay is what subscriber c of a history channel gets after its subscription_succeeded:
// the events it recovers, each with its position frame, then pusher_internal:recovery. With
// events to replay, rep has them (the engine sends them in pages) and the recovery frame as
// its tail; without, extra is the recovery frame alone. The events are the history's own
// frames, shared by every replay of them: nothing is copied per subscriber. A replay past the
// replay budget is refused: recovered:false, reason rate_limited.
func (s *Server) replay(c *conn, ch *cluster.Channel, r cluster.Recovery) (extra []byte, rep *fanout.Replay) {
	if r.Len() > 0 && !s.spendReplay(c, r.Bytes) {
		r.Refuse(ReasonRateLimited)
	}
	if r.Asked {
		s.recoveries.count(r.Recovered, r.Reason)
	}
	var rec []byte
	if r.Unknown && !r.Asked {
		rec = ws.TextFrame(pusher.AppendRecoveryUnknown(nil, ch.Name()))
	} else {
		rec = ws.TextFrame(pusher.AppendRecovery(nil, ch.Name(), r.Latest.Epoch, r.Latest.Offset, r.Asked, r.Recovered, r.Reason))
	}
	if r.Len() == 0 {
		return rec, nil
	}
	return nil, &fanout.Replay{Frames: r.Frames(), Tail: rec}
}

// noHistory is what a subscription that asked to recover a channel without history gets
// after its subscription_succeeded (nil when it did not ask).
func (s *Server) noHistory(name string, since *herald.Position) []byte {
	if since == nil {
		return nil
	}
	s.recoveries.count(false, cluster.ReasonNoHistory)
	return ws.TextFrame(pusher.AppendNoHistory(nil, name))
}

// History reads the events a history channel keeps after offset `after`, at most limit of
// them, with its latest position: from this node on its own, from the bus's store in a
// cluster. An unknown app's or a channel without history's error has code CodeNotFound.
func (s *Server) History(ctx context.Context, appID, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	a := s.app(appID)
	if a == nil {
		return herald.HistoryPage{}, herald.Errorf(herald.CodeAppNotFound, "unknown app %s", appID)
	}
	return s.st.History(ctx, a.st, channel, after, limit)
}
