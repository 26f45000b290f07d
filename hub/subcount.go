package hub

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

// startSubCounts starts the rounds if an app sends subscription counts. Called by start.
func (f *core) startSubCounts() {
	for _, a := range f.apps {
		if a.app.EnableSubscriptionCountEvent {
			f.subCounts = &subCounts{dirty: map[chanKey]struct{}{}}
			f.wg.Add(1)
			go f.runSubCounts()
			return
		}
	}
}

func (f *core) runSubCounts() {
	defer f.wg.Done()
	t := time.NewTicker(cmp.Or(f.cfg.SubscriptionCountInterval, subCountInterval))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.sendSubCounts()
		case <-f.stop:
			return
		}
	}
}

// countChanged marks channel name of a, whose subscription count may have changed, if a
// sends subscription counts (a may be nil: nothing to do).
func (f *core) countChanged(a *appState, name string) {
	if a == nil || !a.app.EnableSubscriptionCountEvent {
		return
	}
	s := f.subCounts
	s.mu.Lock()
	s.dirty[chanKey{a.app.ID, name}] = struct{}{}
	s.mu.Unlock()
}

// sendSubCounts sends each marked channel's count to its subscribers on this node: one
// frame per channel, shared by all of them, queued like a publish.
func (f *core) sendSubCounts() {
	s := f.subCounts
	s.mu.Lock()
	dirty := s.dirty
	if len(dirty) == 0 {
		s.mu.Unlock() // dirty is still the map subscribers mark: not to be read unlocked
		return
	}
	s.dirty = map[chanKey]struct{}{}
	s.mu.Unlock()
	for k := range dirty {
		a := f.apps[k.app]
		ch := a.channels.lookup(k.channel)
		if ch == nil || ch.presence != nil || ch.info.Kind == herald.User {
			continue // nobody here to tell, a presence channel, or a user's own channel
		}
		n := a.channels.localSubs(k.channel)
		if f.state != nil {
			n += f.state.remoteSubs(k.app, k.channel)
		}
		frame := ws.TextFrame(pusher.AppendSubscriptionCount(nil, k.channel, n))
		for i, w := range f.workers {
			if ch.wcount[i].Load() <= 0 {
				continue
			}
			select {
			case w.inbox <- cmd{op: opPublish, ch: ch, frame: frame}:
			case <-f.stop:
				return
			}
		}
	}
}
