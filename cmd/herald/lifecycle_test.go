package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// journal records what fake components did, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, s)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

// fake is a component that writes its starts and stops in a journal. failStart makes start
// fail; onStop, when set, runs in stop and gives its result.
type fake struct {
	name      string
	j         *journal
	failStart bool
	onStop    func(ctx context.Context) error

	mu    sync.Mutex
	stops int
	ctx   context.Context // the last stop's
}

func (f *fake) start() error {
	f.j.add("start " + f.name)
	if f.failStart {
		return errors.New(f.name + " failed")
	}
	return nil
}

func (f *fake) stop(ctx context.Context) error {
	f.mu.Lock()
	f.stops++
	f.ctx = ctx
	f.mu.Unlock()
	var err error
	if f.onStop != nil {
		err = f.onStop(ctx)
	}
	f.j.add("stop " + f.name)
	return err
}

func (f *fake) stopped() (int, context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stops, f.ctx
}

func fakes(j *journal, names ...string) []*fake {
	out := make([]*fake, len(names))
	for i, n := range names {
		out[i] = &fake{name: n, j: j}
	}
	return out
}

func components(fs ...*fake) []component {
	out := make([]component, len(fs))
	for i, f := range fs {
		out[i] = f
	}
	return out
}

// wantStopsOnce checks that the started fakes stopped once and the others never.
func wantStopsOnce(t *testing.T, started, others []*fake) {
	t.Helper()
	for _, f := range started {
		if n, _ := f.stopped(); n != 1 {
			t.Errorf("%s stopped %d times, want once", f.name, n)
		}
	}
	for _, f := range others {
		if n, _ := f.stopped(); n != 0 {
			t.Errorf("%s stopped %d times, but never started", f.name, n)
		}
	}
}

func wantJournal(t *testing.T, j *journal, want ...string) {
	t.Helper()
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("journal %q, want %q", got, want)
	}
}

// TestLifecycleOrder: components start in order and stop in reverse order, each within the
// stop's context.
func TestLifecycleOrder(t *testing.T) {
	j := &journal{}
	fs := fakes(j, "a", "b", "c")
	l := newLifecycle(time.Second)
	if err := l.start(components(fs...)...); err != nil {
		t.Fatal(err)
	}
	wantJournal(t, j, "start a", "start b", "start c")
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "shutdown")
	if err := l.stop(ctx); err != nil {
		t.Fatal(err)
	}
	wantJournal(t, j, "start a", "start b", "start c", "stop c", "stop b", "stop a")
	for _, f := range fs {
		if _, got := f.stopped(); got == nil || got.Value(key{}) != "shutdown" {
			t.Errorf("%s stopped with %v, not the stop's context", f.name, got)
		}
	}
}

// TestLifecycleStartFailure: when a start fails, those started before it stop in reverse
// order within the rollback deadline, the rest never start, start returns that error, and a
// later stop stops nothing again.
func TestLifecycleStartFailure(t *testing.T) {
	j := &journal{}
	fs := fakes(j, "a", "b", "c", "d")
	fs[2].failStart = true
	const rollback = time.Minute
	l := newLifecycle(rollback)
	begun := time.Now()
	err := l.start(components(fs...)...)
	if err == nil || err.Error() != "c failed" {
		t.Fatalf("start: %v, want c's error", err)
	}
	wantJournal(t, j, "start a", "start b", "start c", "stop b", "stop a")
	for _, f := range fs[:2] {
		_, ctx := f.stopped()
		if dl, ok := ctx.Deadline(); !ok || dl.Before(begun.Add(rollback)) || dl.After(time.Now().Add(rollback)) {
			t.Errorf("%s stopped with deadline %v (set %v), want the rollback's, %v from the failure", f.name, dl, ok, rollback)
		}
	}
	if err := l.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantStopsOnce(t, fs[:2], fs[2:])
}

// TestLifecycleDeadline: the deadline is the whole stop's. A component that uses it up
// returns at the deadline, and those after it are still stopped, at once, with the context
// done; stop returns their errors.
func TestLifecycleDeadline(t *testing.T) {
	j := &journal{}
	fs := fakes(j, "a", "b", "c")
	fs[2].onStop = func(ctx context.Context) error { // the node, with clients that never go
		<-ctx.Done()
		return ctx.Err()
	}
	fs[1].onStop = func(ctx context.Context) error { return ctx.Err() }
	l := newLifecycle(time.Second)
	if err := l.start(components(fs...)...); err != nil {
		t.Fatal(err)
	}
	const deadline = 50 * time.Millisecond
	begun := time.Now() // before the deadline is set: the stop cannot end before begun+deadline
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	err := l.stop(ctx)
	took := time.Since(begun)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stop: %v, want the deadline", err)
	}
	if took < deadline || took > deadline+10*time.Second {
		t.Errorf("stop took %v, want about the deadline, %v", took, deadline)
	}
	wantJournal(t, j, "start a", "start b", "start c", "stop c", "stop b", "stop a")
	for _, f := range fs[:2] {
		if _, ctx := f.stopped(); ctx.Err() == nil {
			t.Errorf("%s stopped with a live context after the deadline passed", f.name)
		}
	}
}

// TestLifecycleStopIdempotent: stop stops each component once, however often it is called,
// also at the same time.
func TestLifecycleStopIdempotent(t *testing.T) {
	j := &journal{}
	fs := fakes(j, "a", "b")
	fs[0].onStop = func(context.Context) error { return errors.New("a: trouble") }
	l := newLifecycle(time.Second)
	if err := l.start(components(fs...)...); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { errs <- l.stop(context.Background()) })
	}
	wg.Wait()
	close(errs)
	var reported int
	for err := range errs {
		if err != nil {
			reported++
		}
	}
	if reported != 1 {
		t.Errorf("%d of 3 stops returned a's error, want 1", reported)
	}
	for _, f := range fs {
		if n, _ := f.stopped(); n != 1 {
			t.Errorf("%s stopped %d times, want 1", f.name, n)
		}
	}
	wantJournal(t, j, "start a", "start b", "stop b", "stop a")
}

// TestLifecycleAlongside: an alongside component's stop runs while the components started
// before it stop (it sees a stop before its own returns), after those started after it, and
// stop waits for it.
func TestLifecycleAlongside(t *testing.T) {
	j := &journal{}
	fs := fakes(j, "bus", "session", "api", "console")
	serverStopped := make(chan struct{})
	fs[1].onStop = func(context.Context) error { close(serverStopped); return nil }
	fs[2].onStop = func(ctx context.Context) error { // srv.Shutdown, waiting for a request
		select {
		case <-serverStopped:
			return nil
		case <-ctx.Done():
			return errors.New("api: the node did not stop while the API port was stopping")
		}
	}
	l := newLifecycle(time.Second)
	if err := l.start(fs[0], fs[1], alongside{fs[2]}, fs[3]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.stop(ctx); err != nil {
		t.Fatal(err)
	}
	got := j.get()
	if !slices.Equal(got[:5], []string{"start bus", "start session", "start api", "start console", "stop console"}) {
		t.Fatalf("journal %q: want the starts in order, then the console's stop", got)
	}
	if i, k := slices.Index(got, "stop session"), slices.Index(got, "stop bus"); i < 0 || k < i || !slices.Contains(got, "stop api") || len(got) != 8 {
		t.Fatalf("journal %q: want the node's stop before the bus's, and the API port's", got)
	}
}

// givingFake is a fake whose start gives its name (a giver).
type givingFake struct{ *fake }

func (g givingFake) start() (string, error) {
	if err := g.fake.start(); err != nil {
		return "", err
	}
	return g.name, nil
}

// TestLifecycleStartInSteps: components start in steps, as the root builds each from what
// those before it gave (startGiving gives it): a start that fails stops the components of the
// earlier steps too, in reverse order, and gives nothing.
func TestLifecycleStartInSteps(t *testing.T) {
	j := &journal{}
	fs := fakes(j, "a", "b", "c", "d")
	fs[3].failStart = true
	l := newLifecycle(time.Second)
	if got, err := startGiving(l, givingFake{fs[0]}); err != nil || got != "a" {
		t.Fatalf("startGiving a: %q, %v; want a's name", got, err)
	}
	if err := l.start(fs[1], fs[2]); err != nil {
		t.Fatal(err)
	}
	if got, err := startGiving(l, givingFake{fs[3]}); err == nil || err.Error() != "d failed" || got != "" {
		t.Fatalf("startGiving d: %q, %v; want d's error and nothing given", got, err)
	}
	wantJournal(t, j, "start a", "start b", "start c", "start d", "stop c", "stop b", "stop a")
	if err := l.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantStopsOnce(t, fs[:3], fs[3:])
}
