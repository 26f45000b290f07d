package appstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/backoff"
)

// Source is where a Store's apps live. Its methods are called from the Store's goroutines
// and from the apps API; they must be safe for concurrent use.
type Source interface {
	// Load reads every app.
	Load(ctx context.Context) ([]herald.App, error)
	// Close releases the source's connections.
	Close()
}

// Fingerprinter is an optional ability of a Source: a cheap value that changes whenever the
// apps do (the row count and the updated_at column). ok is false when the source has
// nothing cheap to offer; the Store then reads every app at each poll.
type Fingerprinter interface {
	Fingerprint(ctx context.Context) (fp string, ok bool, err error)
}

// Getter is an optional ability of a Source: read one app (found false when it is gone, or
// its row cannot be read: a BadRows error). A row whose webhooks herald cannot all send, or
// whose history rules it cannot all keep, is found, with a BadRows error holding its
// *WebhookError or *HistoryError. A notification naming an app
// reloads only that app.
type Getter interface {
	Get(ctx context.Context, id string) (a herald.App, found bool, err error)
}

// Notifier is an optional ability of a Source that hears of changes as they are made
// (PostgreSQL's LISTEN). Listen holds one connection until ctx ends or it fails: it calls
// ready once it listens (the Store then reloads everything, for what changed before), then
// changed with the id of each app that changed ("" for "reload everything").
type Notifier interface {
	Listen(ctx context.Context, ready func(), changed func(id string)) error
}

// Writer is an optional ability of a Source: the apps API's writes. Errors wrap ErrExists
// and ErrNotFound where they apply.
type Writer interface {
	Insert(ctx context.Context, a herald.App) error
	// Update writes every column herald maps from a (the row of a.ID), history included;
	// columns herald does not map (webhooks, Soketi's read rate) keep their values.
	Update(ctx context.Context, a herald.App) error
	Delete(ctx context.Context, id string) error
}

// BadRows is the error of a Load (or a Get) that could not read some rows: a row whose id is
// empty or whose column holds what its field cannot take. The apps returned are the other
// rows'; the Store serves them and logs the bad ones, which are no app. A row whose webhooks
// herald cannot all send, or whose history rules it cannot all keep, is an app all the same:
// it is returned (without them), and its *WebhookError or *HistoryError is among the BadRows
// (Usable).
type BadRows []error

// Usable reports whether a row whose Mapping.App returned err is an app all the same: err is
// nil, or holds a *WebhookError or a *HistoryError (Mapping.App returns any other problem
// alone).
func Usable(err error) bool {
	var w *WebhookError
	var h *HistoryError
	return err == nil || errors.As(err, &w) || errors.As(err, &h)
}

func (b BadRows) Error() string {
	if len(b) == 1 {
		return "a row could not be read: " + b[0].Error()
	}
	return fmt.Sprintf("%d rows could not be read, the first: %v", len(b), b[0])
}

var (
	// ErrExists is an insert whose id or key another app has.
	ErrExists = errors.New("an app with this id or key exists")
	// ErrNotFound is a write to an app that does not exist.
	ErrNotFound = errors.New("no such app")
)

// Config sets a Store up; Start gives it its Source.
type Config struct {
	// Kind names the source in /health and logs ("postgres", "mysql").
	Kind string
	// Refresh is how often the source is polled; default 5s.
	Refresh time.Duration
	// Timeout bounds each read of the source; default 5s.
	Timeout time.Duration
	// OnChange, when set, is told of every change, in order, from the Store's goroutines,
	// after the snapshot that has it is in place. It must not call Reload.
	OnChange func([]herald.AppChange)
	Log      *slog.Logger
}

// Status is what /health and the metrics say of a Store.
type Status struct {
	Kind      string    `json:"kind"`
	Up        bool      `json:"up"` // the last read of the source succeeded
	Listening bool      `json:"listening"`
	Apps      int       `json:"apps"`
	LastSync  time.Time `json:"last_sync"` // the last successful read
	LastError string    `json:"last_error,omitempty"`
	// Reloads counts full reads, Errors failed reads: both only grow.
	Reloads uint64 `json:"reloads"`
	Errors  uint64 `json:"errors"`
	// BadWebhooks is how many apps are served without some of their webhooks (herald cannot
	// send them: see the log).
	BadWebhooks int `json:"bad_webhooks"`
	// BadHistory is how many apps are served without some of their history rules (herald
	// cannot keep them: see the log).
	BadHistory int `json:"bad_history"`
}

// snapshot is the apps at one moment; never modified once stored.
type snapshot struct {
	byID, byKey map[string]*herald.App
	list        []*herald.App // by id
	fp          string        // the source's fingerprint when it was read; "" unknown
}

func newSnapshot(apps []*herald.App, fp string) *snapshot {
	s := &snapshot{byID: make(map[string]*herald.App, len(apps)), byKey: make(map[string]*herald.App, len(apps)), fp: fp}
	for _, a := range apps {
		s.byID[a.ID] = a
		s.byKey[a.Key] = a
	}
	s.list = slices.SortedFunc(func(yield func(*herald.App) bool) {
		for _, a := range s.byID {
			if !yield(a) {
				return
			}
		}
	}, func(a, b *herald.App) int { return strings.Compare(a.ID, b.ID) })
	return s
}

// Store is a herald.AppStore over a Source, kept fresh without a query on the hot path.
type Store struct {
	cfg  Config
	src  Source // set by Start
	log  *slog.Logger
	snap atomic.Pointer[snapshot]

	mu       sync.Mutex // serialises reloads, so that changes are reported in order
	smu      sync.Mutex
	status   Status            // under smu
	lastBad  string            // the last bad rows logged, under smu
	badHooks map[string]string // app id -> what was left out of its webhooks, under smu
	badHist  map[string]string // app id -> what was left out of its history rules, under smu

	stale   atomic.Bool
	started atomic.Bool // the first read is done: from then on changes are reported
	kick    chan string // ids to reload from a notification ("" = all); buffered
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  sync.Once
}

var (
	_ herald.AppStore      = (*Store)(nil)
	_ herald.AppStoreStale = (*Store)(nil)
)

// New builds a Store; it holds no app until Start.
func New(cfg Config) *Store {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, log: cfg.Log, kick: make(chan string, 256)}
	s.status.Kind = cfg.Kind
	s.snap.Store(newSnapshot(nil, ""))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Start reads every app from src (an error if it cannot: a node that knows no app serves
// nobody), then keeps them fresh until Close, which closes src. Call it once.
func (s *Store) Start(src Source) error {
	s.src = src
	s.mu.Lock()
	err := s.reloadLocked(s.ctx, "")
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("app store %s: first read: %w", s.cfg.Kind, err)
	}
	s.started.Store(true)
	s.wg.Add(1)
	go s.poll()
	if n, ok := s.src.(Notifier); ok {
		s.wg.Add(1)
		go s.listen(n)
	}
	return nil
}

// Close stops the Store's goroutines and closes its source; it is idempotent. Lookups go on
// answering from the last snapshot.
func (s *Store) Close() {
	s.closed.Do(func() {
		s.cancel()
		s.wg.Wait()
		if s.src != nil {
			s.src.Close()
		}
	})
}

// AppByID implements herald.AppStore: one atomic load and one map read.
func (s *Store) AppByID(id string) (*herald.App, bool) { a, ok := s.snap.Load().byID[id]; return a, ok }

// AppByKey implements herald.AppStore.
func (s *Store) AppByKey(key string) (*herald.App, bool) {
	a, ok := s.snap.Load().byKey[key]
	return a, ok
}

// Apps implements herald.AppStore: every app, by id. The slice is shared: do not modify it.
func (s *Store) Apps() []*herald.App { return s.snap.Load().list }

// Stale implements herald.AppStoreStale: the last read of the source failed.
func (s *Store) Stale() bool { return s.stale.Load() }

// Source is the store's source, for the apps API (which checks for Writer).
func (s *Store) Source() Source { return s.src }

// Status reports the store's state.
func (s *Store) Status() Status {
	s.smu.Lock()
	defer s.smu.Unlock()
	st := s.status
	st.Apps = len(s.snap.Load().list)
	st.BadWebhooks = len(s.badHooks)
	st.BadHistory = len(s.badHist)
	return st
}

// Reload reads every app now and reports what changed; the apps API calls it after a write,
// so that this node has the change at once.
func (s *Store) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(ctx, "")
}

// ReloadApp reads one app now (through Getter when the source has it, else everything).
func (s *Store) ReloadApp(ctx context.Context, id string) error {
	g, ok := s.src.(Getter)
	if !ok || id == "" {
		return s.Reload(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	a, found, err := g.Get(ctx, id)
	var bad BadRows
	if errors.As(err, &bad) {
		err = nil // a bad row is not found: no app any more; one whose webhooks were left out is
	}
	if err != nil {
		s.failed(err)
		return err
	}
	s.rowProblems(bad, id)
	old := s.snap.Load()
	apps := make([]*herald.App, 0, len(old.list)+1)
	for _, x := range old.list {
		if x.ID != id {
			apps = append(apps, x)
		}
	}
	if found {
		apps = append(apps, keep(old, a))
	}
	// The fingerprint is not known to match any more: the next poll compares afresh.
	s.install(old, newSnapshot(apps, ""))
	return nil
}

// reloadLocked reads everything (with fp, the fingerprint read just before, when known).
func (s *Store) reloadLocked(ctx context.Context, fp string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	list, err := s.src.Load(ctx)
	var bad BadRows
	if errors.As(err, &bad) {
		err = nil
	}
	if err != nil {
		s.failed(err)
		return err
	}
	s.rowProblems(bad, "")
	old := s.snap.Load()
	apps := make([]*herald.App, len(list))
	for i := range list {
		apps[i] = keep(old, list[i])
	}
	s.smu.Lock()
	s.status.Reloads++
	s.smu.Unlock()
	s.install(old, newSnapshot(apps, fp))
	return nil
}

// install puts next in place, marks the source up and reports what changed since old.
func (s *Store) install(old, next *snapshot) {
	changes := diff(old, next)
	s.snap.Store(next)
	if s.stale.Swap(false) {
		s.log.Info("app store reachable again", "kind", s.cfg.Kind, "apps", len(next.list))
	}
	s.smu.Lock()
	s.status.Up, s.status.LastSync, s.status.LastError = true, time.Now(), ""
	s.smu.Unlock()
	// The first read is no change: whoever uses the store reads its apps once started.
	if len(changes) > 0 && s.cfg.OnChange != nil && s.started.Load() {
		s.cfg.OnChange(changes)
	}
}

// keep returns the app of old with a's id when it equals a: an unchanged app keeps its
// pointer, so that diff (and the server) see a change as a new pointer.
func keep(old *snapshot, a herald.App) *herald.App {
	a.Limits = a.Limits.WithDefaults()
	if o := old.byID[a.ID]; o != nil && reflect.DeepEqual(*o, a) {
		return o
	}
	return &a
}

// rowProblems takes the problems of a read of every row (id "") or of row id: the rows
// skipped are logged (badRows); the apps served without some of their webhooks or history
// rules are counted (Status.BadWebhooks, Status.BadHistory), and each logged when its
// problem is new.
func (s *Store) rowProblems(bad BadRows, id string) {
	var skipped BadRows
	hooks, hist := map[string]string{}, map[string]string{}
	for _, e := range bad {
		w, h := (*WebhookError)(nil), (*HistoryError)(nil)
		isW, isH := errors.As(e, &w), errors.As(e, &h)
		if isW {
			hooks[w.App] = w.Error()
		}
		if isH {
			hist[h.App] = h.Error()
		}
		if !isW && !isH {
			skipped = append(skipped, e)
		}
	}
	if len(skipped) > 0 {
		s.badRows(skipped)
	}
	s.smu.Lock()
	oldHooks, oldHist := s.badHooks, s.badHist
	s.badHooks, s.badHist = merge(oldHooks, hooks, id), merge(oldHist, hist, id)
	s.smu.Unlock()
	s.logNew(oldHooks, hooks, "app store: webhooks left out: the app is served without them until fixed")
	s.logNew(oldHist, hist, "app store: history rules left out: the app is served without them until fixed")
}

// merge returns the problems by app after a read of every row (id "": now) or of row id
// (old, with id's replaced by now's).
func merge(old, now map[string]string, id string) map[string]string {
	if id == "" {
		return now
	}
	out := maps.Clone(old)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, id)
	maps.Copy(out, now)
	return out
}

// logNew logs each problem of now that old did not have, by app.
func (s *Store) logNew(old, now map[string]string, msg string) {
	for _, app := range slices.Sorted(maps.Keys(now)) {
		if old[app] != now[app] {
			s.log.Warn(msg, "kind", s.cfg.Kind, "app_id", app, "err", now[app])
		}
	}
}

// badRows logs rows that could not be read, once for each new set of them.
func (s *Store) badRows(bad BadRows) {
	s.smu.Lock()
	msg := bad.Error()
	seen := msg == s.lastBad
	s.lastBad = msg
	s.smu.Unlock()
	if !seen {
		s.log.Warn("app store: rows skipped: they are no app until fixed", "kind", s.cfg.Kind, "rows", len(bad), "err", msg)
	}
}

// failed marks the source down.
func (s *Store) failed(err error) {
	if s.ctx.Err() != nil {
		return // closing
	}
	if !s.stale.Swap(true) {
		s.log.Warn("app store unreachable: serving the apps known", "kind", s.cfg.Kind, "apps", len(s.snap.Load().list), "err", err)
	}
	s.smu.Lock()
	s.status.Up, s.status.LastError = false, err.Error()
	s.status.Errors++
	s.smu.Unlock()
}

// diff lists the apps added, changed and removed from old to next, by id: a changed app is
// a new pointer (see keep).
func diff(old, next *snapshot) []herald.AppChange {
	var out []herald.AppChange
	for _, a := range next.list {
		if o := old.byID[a.ID]; o != a {
			out = append(out, herald.AppChange{Old: o, New: a})
		}
	}
	for _, o := range old.list {
		if next.byID[o.ID] == nil {
			out = append(out, herald.AppChange{Old: o})
		}
	}
	return out
}

// poll reads the source every Refresh: only its fingerprint when it has one, and everything
// when that changed (or cannot be read cheaply); it also serves the notifications' kicks.
func (s *Store) poll() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Refresh)
	defer t.Stop()
	fpr, hasFP := s.src.(Fingerprinter)
	for n := 1; ; n++ {
		select {
		case <-s.ctx.Done():
			return
		case id := <-s.kick:
			_ = s.ReloadApp(s.ctx, id)
		case <-t.C:
			if !hasFP {
				_ = s.Reload(s.ctx)
				continue
			}
			ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
			fp, ok, err := fpr.Fingerprint(ctx)
			cancel()
			switch {
			case err != nil:
				s.failed(err)
			// Every fullEvery polls everything is read whatever the fingerprint says: a
			// second-resolution updated_at misses a second write to a row in one second.
			case !ok || fp != s.snap.Load().fp || s.stale.Load() || n%fullEvery == 0:
				s.mu.Lock()
				_ = s.reloadLocked(s.ctx, fp)
				s.mu.Unlock()
			default: // up, nothing changed
				s.mu.Lock()
				cur := s.snap.Load()
				s.install(cur, cur)
				s.mu.Unlock()
			}
		}
	}
}

// fullEvery is how many polls apart the Store reads everything even when the fingerprint
// has not changed.
const fullEvery = 12

// listen keeps a Notifier listening, reconnecting with a backoff, and turns its
// notifications into kicks for poll.
func (s *Store) listen(n Notifier) {
	defer s.wg.Done()
	b := backoff.Policy{First: 100 * time.Millisecond, Most: max(s.cfg.Refresh, time.Second), Jitter: backoff.Jitter{Below: 0.5}}
	for failures := 0; s.ctx.Err() == nil; failures++ {
		err := n.Listen(s.ctx, func() {
			s.setListening(true)
			failures = 0
			s.push("")
		}, s.push)
		s.setListening(false)
		if s.ctx.Err() != nil {
			return
		}
		s.log.Warn("app store: change notifications lost, polling meanwhile", "kind", s.cfg.Kind, "err", err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(b.Wait(failures)):
		}
	}
}

// push asks poll to reload id ("" = everything); when the queue is full, everything.
func (s *Store) push(id string) {
	select {
	case s.kick <- id:
	default:
		select {
		case s.kick <- "":
		default: // a full reload is queued already... or will be at the next poll
		}
	}
}

func (s *Store) setListening(on bool) {
	s.smu.Lock()
	s.status.Listening = on
	s.smu.Unlock()
}
