package session

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
)

// This file is the server's side of the activity seam (herald.ActivityObserver): webhooks and
// the console attach observers to an app, and the server reports to them what happens there.
//
// Cost: each place that reports a kind first loads the app's wanted set (one atomic load and
// a branch); only when some observer wants the kind does it build an Activity (one
// allocation and a time.Now) and call the observers that want it. Nothing is reported per
// recipient of a fan-out.
//
// Channel-level kinds describe the cluster-wide state and fire once for the cluster (see
// the cluster package's stream_peers.go and docs/webhooks.md for the rule and its residual races):
//
//   - the node whose local change makes the cluster-wide state change fires (its first
//     subscription when no other node has one, its last when no other node has one; a user's
//     first socket when no other node has the user, its last when none has);
//   - a change that only another node's record reveals (that node thought the others still
//     had the channel or the user, and so did not fire, as its record says; or a dead node's
//     share being dropped) fires on the live node with the lowest epoch.

// observers is one app's activity observers, read without a lock by the reporting paths.
type observers struct {
	wants atomic.Uint32                // herald.ActivitySet: the union of what the observers want
	list  atomic.Pointer[[]observerOf] // copy on write under mu
	mu    sync.Mutex
}

type observerOf struct {
	o     herald.ActivityObserver
	wants herald.ActivitySet
}

// Observe attaches o to app appID's activity, before or while the server serves: from then on
// the kinds in o.Wants() are reported to o (see herald.ActivityObserver). Several observers
// may watch one app. Wants is read now and at each RefreshObservers; detach stops reporting
// to o (when detach returns, o is called no more, except by reports already under way).
func (s *Server) Observe(appID string, o herald.ActivityObserver) (detach func(), err error) {
	a := s.app(appID)
	if a == nil {
		return nil, fmt.Errorf("session: observe: app %q does not exist", appID)
	}
	a.obs.update(func(l []observerOf) []observerOf { return append(l, observerOf{o: o}) })
	var once sync.Once
	return func() {
		once.Do(func() {
			a.obs.update(func(l []observerOf) []observerOf {
				return slices.DeleteFunc(l, func(x observerOf) bool { return x.o == o })
			})
		})
	}, nil
}

// RefreshObservers reads again what app appID's observers want, for an observer whose Wants
// changed (a console page opened or closed).
func (s *Server) RefreshObservers(appID string) {
	if a := s.state(appID); a != nil {
		a.obs.update(func(l []observerOf) []observerOf { return l })
	}
}

// update replaces the list by change(copy of the list), then recomputes every Wants.
func (s *observers) update(change func([]observerOf) []observerOf) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur []observerOf
	if p := s.list.Load(); p != nil {
		cur = slices.Clone(*p)
	}
	next := change(cur)
	var all herald.ActivitySet
	for i := range next {
		next[i].wants = next[i].o.Wants()
		all |= next[i].wants
	}
	s.list.Store(&next)
	s.wants.Store(uint32(all))
}

// wants reports whether some observer of a wants kind k: one atomic load.
func (a *appState) wants(k herald.ActivityKind) bool {
	return herald.ActivitySet(a.obs.wants.Load()).Has(k)
}

// emit reports act to the observers that want its kind. Callers check wants first.
func (a *appState) emit(act *herald.Activity) {
	p := a.obs.list.Load()
	if p == nil {
		return
	}
	act.App = a.id
	act.Time = time.Now()
	for _, x := range *p {
		if x.wants.Has(act.Kind) {
			x.o.Observe(act)
		}
	}
}

// Which kinds need the cluster-wide decision of who fires.
var (
	occupancyKinds = herald.Activities(herald.ChannelOccupied, herald.ChannelVacated)
	countKinds     = occupancyKinds | herald.Activities(herald.SubscriptionCount)
)

// subsChanged follows every change of a channel's subscription count on this node: edge is
// +1 when the channel was created here (its first local subscription), -1 when it was
// forgotten (its last left), 0 otherwise. It reports channel_occupied / channel_vacated when the
// cluster-wide count changes to or from zero by this change, and subscription_count; the
// state records the node's new count for the others, with whether it fired.
func (s *Server) subsChanged(a *appState, name string, edge int) {
	set := herald.ActivitySet(a.obs.wants.Load())
	fired := false
	if set&countKinds != 0 {
		remote := s.st.RemoteSubs(a.st, name)
		if edge != 0 && set&occupancyKinds != 0 && remote == 0 {
			fired = true
			k := herald.ChannelOccupied
			if edge < 0 {
				k = herald.ChannelVacated
			}
			if set.Has(k) {
				a.emit(&herald.Activity{Kind: k, Channel: name})
			}
		}
		if set.Has(herald.SubscriptionCount) {
			a.emit(&herald.Activity{Kind: herald.SubscriptionCount, Channel: name, Count: a.st.LocalSubs(name) + remote})
		}
	}
	s.st.Counted(a.st, name, edge != 0, fired)
}

// apiEvents reports the events a publish (REST API, ingest) delivered.
func (s *Server) apiEvents(a *appState, evs []herald.Event) {
	for i := range evs {
		a.emit(&herald.Activity{Kind: herald.APIEvent, Channel: evs[i].Channel, Event: evs[i].Name, Data: evs[i].Data, SocketID: evs[i].SocketID})
	}
}

// Report hands an activity that happened outside the server (a webhook sent) to app appID's
// observers that want its kind, as if the server had seen it.
func (s *Server) Report(appID string, act *herald.Activity) {
	if a := s.state(appID); a != nil && a.wants(act.Kind) {
		a.emit(act)
	}
}
