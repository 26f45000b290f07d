package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/lograte"
)

// Sender sends the webhooks of every app that has some. New starts one goroutine per webhook;
// Close stops them.
type Sender struct {
	opts   Options
	log    *slog.Logger
	client *http.Client
	apps   map[string]*appHooks
	order  []string // app ids, as given

	stop   chan struct{} // closed by Close: send what is left, without waiting for batches
	ctx    context.Context
	cancel context.CancelFunc // aborts requests and retries: Close's deadline passed
	wg     sync.WaitGroup
	once   sync.Once
}

// appHooks is one app's webhooks, and the app's activity observer.
type appHooks struct {
	app     App
	targets []*target
	wants   herald.ActivitySet
}

// target is one webhook: its queue and its sending goroutine.
type target struct {
	s     *Sender
	app   *appHooks
	hook  Webhook
	types map[string]bool // the event types wanted; empty: all
	opts  *Options

	mu         sync.Mutex
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
		if len(a.Webhooks) == 0 {
			continue
		}
		ah := &appHooks{app: a}
		for _, w := range a.Webhooks {
			t := &target{s: s, app: ah, hook: w, opts: &s.opts, types: map[string]bool{}, vacating: map[string]*delayed{},
				removing: map[memberKey]*delayed{}, counts: map[string]int{}, wake: make(chan struct{}, 1)}
			for _, n := range w.EventTypes {
				t.types[n] = true
			}
			ah.targets = append(ah.targets, t)
			ah.wants |= t.kinds()
		}
		s.apps[a.ID] = ah
		s.order = append(s.order, a.ID)
	}
	for _, id := range s.order {
		for _, t := range s.apps[id].targets {
			s.wg.Add(1)
			go t.run()
		}
	}
	return s
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
func (s *Sender) Apps() []string { return s.order }

// Observer returns the activity observer of app appID, to attach to the server; nil when the
// app has no webhooks.
func (s *Sender) Observer(appID string) herald.ActivityObserver {
	if a := s.apps[appID]; a != nil {
		return a
	}
	return nil
}

// Wants implements herald.ActivityObserver.
func (a *appHooks) Wants() herald.ActivitySet { return a.wants }

// Observe implements herald.ActivityObserver: it only queues.
func (a *appHooks) Observe(act *herald.Activity) {
	ev, ok := eventOf(act)
	if !ok {
		return
	}
	now := time.Now()
	for _, t := range a.targets {
		t.offer(ev, now)
	}
}

// Close sends what is queued (leaves still delayed included) and stops, within ctx: when it
// is done, requests and retries in progress are abandoned and what they held is counted as
// dropped. It is idempotent.
func (s *Sender) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
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

// Stats returns each app's counters, in the order New was given the apps.
func (s *Sender) Stats() []Stats {
	out := make([]Stats, 0, len(s.order))
	for _, id := range s.order {
		st := Stats{AppID: id}
		for _, t := range s.apps[id].targets {
			st.Sent += t.sent.Load()
			st.Failed += t.failed.Load()
			st.Retried += t.retried.Load()
			st.DroppedQueueFull += t.droppedFull.Load()
			st.DroppedExpired += t.droppedExpired.Load()
			st.DroppedRejected += t.droppedRejected.Load()
			st.QueueDepth += t.depth.Load()
		}
		out = append(out, st)
	}
	return out
}
