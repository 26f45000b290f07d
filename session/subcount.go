package session

import (
	"cmp"
	"sync"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// Subscription counts: an app that enables them (herald.App.EnableSubscriptionCountEvent)
// sends pusher_internal:subscription_count {"subscription_count":N} to the subscribers of its
// channels, presence channels excepted (they have member events), as Pusher does; pusher-js
// re-emits it as pusher:subscription_count and keeps N in channel.subscriptionCount. A
// user's own #server-to-user- channel gets none either.
//
// Policy, so that a busy channel cannot flood its subscribers: a subscribe or unsubscribe
// (here, or in a cluster on another node, as the cluster state reports it) marks the channel;
// every interval (Config.SubscriptionCountInterval, 1 s) the marked channels' subscribers get
// the channel's count at that moment, cluster-wide, once. However fast a channel churns, each of its subscribers gets at
// most one count event per interval, and a channel nobody joins or leaves gets none; a new
// subscriber gets the count within one interval of its subscription_succeeded. Apps without
// the switch mark nothing (one test of a bool per subscribe and unsubscribe), no goroutine
// runs unless an app has it, and publishes never see any of it.

// subCountInterval is the default of Config.SubscriptionCountInterval.
const subCountInterval = time.Second

// subCounts holds the channels marked since the last round.
type subCounts struct {
	mu    sync.Mutex
	dirty map[chanKey]struct{}
}

type chanKey struct{ app, channel string }

// startSubCounts starts the rounds, once the first app that sends subscription counts is
// configured (Server.subOnce).
func (s *Server) startSubCounts() {
	s.wg.Add(1)
	go s.runSubCounts()
}

func (s *Server) runSubCounts() {
	defer s.wg.Done()
	t := time.NewTicker(cmp.Or(s.cfg.SubscriptionCountInterval, subCountInterval))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.sendSubCounts()
		case <-s.stop:
			return
		}
	}
}

// countChanged marks channel name of a, whose subscription count may have changed, if a
// sends subscription counts (a may be nil: nothing to do).
func (s *Server) countChanged(a *appState, name string) {
	if a == nil || !a.cur().EnableSubscriptionCountEvent {
		return
	}
	sc := s.subCounts
	sc.mu.Lock()
	sc.dirty[chanKey{a.id, name}] = struct{}{}
	sc.mu.Unlock()
}

// sendSubCounts sends each marked channel's count to its subscribers on this node: one
// frame per channel, shared by all of them, queued like a publish.
func (s *Server) sendSubCounts() {
	sc := s.subCounts
	sc.mu.Lock()
	dirty := sc.dirty
	if len(dirty) == 0 {
		sc.mu.Unlock() // dirty is still the map subscribers mark: not to be read unlocked
		return
	}
	sc.dirty = map[chanKey]struct{}{}
	sc.mu.Unlock()
	for k := range dirty {
		a := s.state(k.app)
		ch := a.st.Lookup(k.channel)
		if ch == nil || ch.Info().Kind == herald.Presence || ch.Info().Kind == herald.User {
			continue // nobody here to tell, a presence channel, or a user's own channel
		}
		n := a.st.LocalSubs(k.channel) + s.st.RemoteSubs(a.st, k.channel)
		frame := ws.TextFrame(pusher.AppendSubscriptionCount(nil, k.channel, n))
		if !s.eng.DispatchUntil(&ch.Channel, frame, s.stop) {
			return
		}
	}
}
