package cluster

import (
	"context"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// Local is the State of a single node: nothing to share, every gate open, every publish
// delivered at once to the node's subscribers.
type Local struct{ node }

var _ State = (*Local)(nil)

// NewLocal returns the State of a single node delivering through eng.
func NewLocal(cfg Config, eng *fanout.Engine) *Local {
	l := &Local{node: newNode(cfg, eng)}
	l.others = alone{}
	return l
}

// Start implements State.
func (l *Local) Start(li Listener) { l.start(li) }

// Stop implements State.
func (l *Local) Stop(context.Context) { l.halt() }

// Acquire implements State: the channel's gate is open at once.
func (l *Local) Acquire(a *App, name string, info herald.ChannelInfo) (*Channel, bool) {
	ch, first, _ := a.table.acquire(name, info, true)
	return ch, first
}

// Release implements State.
func (l *Local) Release(a *App, ch *Channel) bool {
	last, _ := a.table.release(ch)
	return last
}

// Publish implements State.
func (l *Local) Publish(a *App, ev herald.Event, frame []byte) error {
	evs, frames := [1]herald.Event{ev}, [1][]byte{frame}
	return l.publish(a, evs[:], frames[:])
}

// PublishBatch implements State.
func (l *Local) PublishBatch(a *App, evs []herald.Event, frames [][]byte) error {
	return l.publish(a, evs, frames)
}

// publish reserves the fan-out queues' slots for every event first, so that it delivers all
// of evs or, with a CodeBusy error, none. An event whose idempotency key this node published
// within the key window is left out (answered as it was); a failed publish forgets its keys.
func (l *Local) publish(a *App, evs []herald.Event, frames [][]byte) (err error) {
	skip, held, err := l.keys.claim(l.cfg.PublishTimeout, a.id, evs)
	if err != nil {
		return err
	}
	if held != nil {
		defer func() { l.keys.settle(a.id, held, err == nil) }()
	}
	var s fanout.Slots
	s.Reset(l.eng)
	for j := range evs {
		if skip != nil && skip[j] {
			continue
		}
		if ch := a.table.lookup(evs[j].Channel); ch != nil {
			s.Want(&ch.Channel)
		}
	}
	if err := l.eng.Reserve(&s); err != nil {
		return err
	}
	for i := range evs {
		if skip != nil && skip[i] {
			continue
		}
		ev := &evs[i]
		l.deliver(a, ev.Channel, herald.Classify(ev.Channel).Cache, frames[i], l.eng.Local(ev.SocketID), &s, ev.OriginNanos())
	}
	l.eng.Release(&s) // what subscribers who left meanwhile did not use
	return nil
}

// CatchUp implements State: a single node's history is never behind a client's position
// of its epoch (one ahead of it is answered ahead).
func (l *Local) CatchUp(*App, *Channel, *herald.Position, func(bool)) bool { return false }

// Forward implements State.
func (l *Local) Forward(a *App, channel string, from *fanout.Conn, frame []byte) {
	l.dispatch(a, channel, herald.Classify(channel).Cache, frame, from.Num(), nil, fanout.Measure{})
}

// History implements State: the node keeps its channels' histories.
func (l *Local) History(_ context.Context, a *App, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	if !a.HasHistory(channel) {
		return herald.HistoryPage{}, herald.Errorf(herald.CodeNotFound, "channel %s keeps no history", channel)
	}
	return a.readLocal(channel, after, limit), nil
}

// Terminate implements State: there is no other node.
func (l *Local) Terminate(*App, string) {}

// alone is a single node's share: nobody hears of it, nobody else has anything.
type alone struct{}

func (alone) markSubs(string, string, bool, bool)     {}
func (alone) markMember(string, string, string, bool) {}
func (alone) markUser(string, string, bool)           {}
func (alone) remoteSubs(string, string) int           { return 0 }
func (alone) remoteChannels(_ *App, _ string, stats []herald.ChannelStat) []herald.ChannelStat {
	return stats
}

// LocalState returns how to build a single node's State, configured by cfg, on the node's
// engine: what session.New takes.
func LocalState(cfg Config) func(*fanout.Engine) State {
	return func(eng *fanout.Engine) State { return NewLocal(cfg, eng) }
}
