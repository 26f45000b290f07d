package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/lograte"
)

// Sender sends the webhooks of every app that has some. It starts one goroutine per webhook;
// Set and Remove follow the apps as they change; Close stops them all.
type Sender struct {
	opts   Options
	log    *slog.Logger
	client *http.Client

	// mu guards apps, order, closed and each app's retiring and gone. Lock order: mu before
	// target.mu.
	mu     sync.Mutex
	apps   map[string]*appHooks
	order  []string // app ids, in the order they were first set
	closed bool

	stop   chan struct{} // closed by Close: send what is left, without waiting for batches
	ctx    context.Context
	cancel context.CancelFunc // aborts requests and retries: Close's deadline passed
	wg     sync.WaitGroup
	once   sync.Once
}

// appHooks is one app's webhooks, and the app's activity observer: the same value while the
// app has webhooks, whatever changes, so that it stays attached.
type appHooks struct {
	app     App                       // ID only: the credentials are cred's
	cred    atomic.Pointer[App]       // the app's id, key and secret now
	targets atomic.Pointer[[]*target] // the webhooks now (copy on write under Sender.mu)
	wants   atomic.Uint32             // herald.ActivitySet of targets

	retiring []*target // removed or changed webhooks still sending what they held
	gone     Stats     // the counters of the app's webhooks that stopped
}

// target is one webhook: its queue and its sending goroutine.
type target struct {
	s     *Sender
	app   *appHooks
	hook  Webhook
	types map[string]bool // the event types wanted; empty: all
	opts  *Options

	retire chan struct{}   // closed when the webhook is removed or changed: send what is held, stop
	done   chan struct{}   // closed when run returns
	prev   <-chan struct{} // the done of the webhook of the same URL this one replaced; nil once passed

	mu         sync.Mutex
	retired    bool    // retire is closed; offer queues nothing more
	queue      []event // queue[head:] wait for a batch
	head       int
	delayed    []*delayed // delayed[dhead:], in due order
	dhead      int
	vacating   map[string]*delayed
	removing   map[memberKey]*delayed
	counts     map[string]int // subscription_count: the latest per channel, for the next batch
	countOrder []string
	held       int // events queued, delayed (not cancelled) and counted
	wake       chan struct{}

	sent, failed, retried atomic.Uint64
	droppedFull           atomic.Uint64
	droppedExpired        atomic.Uint64
	droppedRejected       atomic.Uint64
	depth                 atomic.Int64
	dropWarn, failWarn    lograte.Limit
}

// New builds the Sender of apps' webhooks (apps without any are left out) and starts it.
func New(apps []App, opts Options, log *slog.Logger) *Sender {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{opts: opts, log: log, apps: map[string]*appHooks{}, stop: make(chan struct{}), ctx: ctx, cancel: cancel,
		client: &http.Client{
			Timeout: opts.Timeout,
			// A redirect is an answer: a POST is not replayed elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	for _, a := range apps {
		s.Set(a)
	}
	return s
}

// Set makes a's webhooks the ones of app a.ID, while the Sender runs: a webhook unchanged
// (the same URL, event types, filter and headers) keeps its queue; one removed or changed
// sends what it holds at once (leaves still delayed included) and stops, its successor for
// the same URL sending only after it; a new one starts. A changed key or secret signs the
// next requests. An app without webhooks is removed (Remove). Set reports whether the app
// has webhooks now, and so an observer (Observer) to attach; after Close it does nothing.
func (s *Sender) Set(a App) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if len(a.Webhooks) == 0 {
		s.removeLocked(a.ID)
		return false
	}
	ah := s.apps[a.ID]
	if ah == nil {
		ah = &appHooks{app: App{ID: a.ID}}
		s.apps[a.ID] = ah
		s.order = append(s.order, a.ID)
	}
	cred := a
	cred.Webhooks = nil
	ah.cred.Store(&cred)

	var old []*target
	if p := ah.targets.Load(); p != nil {
		old = slices.Clone(*p)
	}
	next := make([]*target, len(a.Webhooks))
	for i, w := range a.Webhooks { // unchanged webhooks first, so that a duplicate URL matches its twin
		if j := slices.IndexFunc(old, func(t *target) bool { return t != nil && reflect.DeepEqual(t.hook, w) }); j >= 0 {
			next[i], old[j] = old[j], nil
		}
	}
	var fresh []*target
	var wants herald.ActivitySet
	for i, w := range a.Webhooks {
		if next[i] == nil {
			t := s.newTarget(ah, w)
			if j := slices.IndexFunc(old, func(o *target) bool { return o != nil && o.hook.URL == w.URL }); j >= 0 {
				t.prev = old[j].done
			}
			next[i] = t
			fresh = append(fresh, t)
		}
		wants |= next[i].kinds()
	}
	for _, t := range old {
		if t != nil {
			s.retireLocked(ah, t)
		}
	}
	ah.targets.Store(&next)
	ah.wants.Store(uint32(wants))
	for _, t := range fresh {
		s.wg.Add(1)
		go t.run()
	}
	return true
}

// Remove stops sending app appID's webhooks: each sends what it holds at once and stops.
// Detach the app's observer first (an event observed after Remove is not sent).
func (s *Sender) Remove(appID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(appID)
}

// removeLocked is Remove, with s.mu held.
func (s *Sender) removeLocked(appID string) {
	ah := s.apps[appID]
	if ah == nil {
		return
	}
	if p := ah.targets.Swap(&[]*target{}); p != nil {
		for _, t := range *p {
			s.retireLocked(ah, t)
		}
	}
	ah.wants.Store(0)
	delete(s.apps, appID)
	s.order = slices.DeleteFunc(s.order, func(id string) bool { return id == appID })
}

// retireLocked tells t to send what it holds and stop; s.mu is held.
func (s *Sender) retireLocked(ah *appHooks, t *target) {
	t.mu.Lock()
	t.retired = true
	t.mu.Unlock()
	close(t.retire)
	ah.retiring = append(ah.retiring, t)
}

// finished is the end of t's goroutine: a retired webhook's counters join its app's gone.
func (s *Sender) finished(t *target) {
	close(t.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	ah := t.app
	if i := slices.Index(ah.retiring, t); i >= 0 {
		ah.retiring = slices.Delete(ah.retiring, i, i+1)
		ah.gone.add(t)
	}
}

func (s *Sender) newTarget(ah *appHooks, w Webhook) *target {
	t := &target{s: s, app: ah, hook: w, opts: &s.opts, types: map[string]bool{}, vacating: map[string]*delayed{},
		removing: map[memberKey]*delayed{}, counts: map[string]int{}, wake: make(chan struct{}, 1),
		retire: make(chan struct{}), done: make(chan struct{})}
	for _, n := range w.EventTypes {
		t.types[n] = true
	}
	return t
}

// ending reports whether t is to send what it holds and stop: the Sender closes, or t was
// retired.
func (t *target) ending() bool {
	select {
	case <-t.retire:
		return true
	default:
		return t.s.stopping()
	}
}

// kinds is the activity a webhook needs: what it sends, and the opposite of each leave or
// join it sends, which cancels a pending leave.
func (t *target) kinds() herald.ActivitySet {
	var s herald.ActivitySet
	for name, k := range kinds {
		if t.wants(name) {
			s |= herald.Activities(k)
		}
	}
	if s.Has(herald.ChannelOccupied) || s.Has(herald.ChannelVacated) {
		s |= herald.Activities(herald.ChannelOccupied, herald.ChannelVacated)
	}
	if s.Has(herald.MemberAdded) || s.Has(herald.MemberRemoved) {
		s |= herald.Activities(herald.MemberAdded, herald.MemberRemoved)
	}
	return s
}

// Apps lists the ids of the apps that have webhooks.
func (s *Sender) Apps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// Observer returns the activity observer of app appID, to attach to the server; nil when the
// app has no webhooks. It is the same observer for as long as the app has webhooks: after a
// Set, refresh what it wants (session.Server.RefreshObservers).
func (s *Sender) Observer(appID string) herald.ActivityObserver {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.apps[appID]; a != nil {
		return a
	}
	return nil
}

// Wants implements herald.ActivityObserver.
func (a *appHooks) Wants() herald.ActivitySet { return herald.ActivitySet(a.wants.Load()) }

// Observe implements herald.ActivityObserver: it only queues.
func (a *appHooks) Observe(act *herald.Activity) {
	ev, ok := eventOf(act)
	if !ok {
		return
	}
	p := a.targets.Load()
	if p == nil {
		return
	}
	now := time.Now()
	for _, t := range *p {
		t.offer(ev, now)
	}
}

// Close sends what is queued (leaves still delayed included) and stops, within ctx: when it
// is done, requests and retries in progress are abandoned and what they held is counted as
// dropped. It is idempotent.
func (s *Sender) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true // no webhook starts from now on
		s.mu.Unlock()
		close(s.stop)
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.cancel()
			<-done
			err = errors.New("webhook: events still queued at the shutdown deadline were dropped")
		}
		s.cancel()
	})
	return err
}

func (s *Sender) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// Stats is one app's webhook counters, summed over its webhooks.
type Stats struct {
	AppID   string
	Sent    uint64 // events delivered (a 2xx answer)
	Failed  uint64 // requests that failed (an error, or an answer other than 2xx)
	Retried uint64 // requests sent again after a failure
	// Dropped events: the queue was full, retries ran out (or the shutdown deadline came),
	// or the endpoint rejected them (a 4xx other than 408 and 429).
	DroppedQueueFull, DroppedExpired, DroppedRejected uint64
	QueueDepth                                        int64 // events waiting now
}

// Stats returns each app's counters, in the order the apps were first given (New, Set); a
// webhook removed or changed counts with its app until the app is removed.
func (s *Sender) Stats() []Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Stats, 0, len(s.order))
	for _, id := range s.order {
		ah := s.apps[id]
		st := ah.gone
		st.AppID = id
		for _, t := range *ah.targets.Load() {
			st.add(t)
		}
		for _, t := range ah.retiring {
			st.add(t)
		}
		out = append(out, st)
	}
	return out
}

// add adds t's counters to st.
func (st *Stats) add(t *target) {
	st.Sent += t.sent.Load()
	st.Failed += t.failed.Load()
	st.Retried += t.retried.Load()
	st.DroppedQueueFull += t.droppedFull.Load()
	st.DroppedExpired += t.droppedExpired.Load()
	st.DroppedRejected += t.droppedRejected.Load()
	st.QueueDepth += t.depth.Load()
}
