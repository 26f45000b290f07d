package appstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
	"github.com/herald-rt/herald/appstore/appstoretest"
)

// listSource is a Source over a list the test changes: the Store's own logic (snapshots,
// changes, staleness) without a database; the adapters' tests run the real ones.
type listSource struct {
	mu   sync.Mutex
	apps []herald.App
	down bool
}

func (l *listSource) Load(context.Context) ([]herald.App, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return nil, errors.New("down")
	}
	return append([]herald.App(nil), l.apps...), nil
}

func (l *listSource) Close() {}

func apps(n int) []herald.App {
	out := make([]herald.App, n)
	for i := range out {
		out[i] = herald.App{ID: fmt.Sprintf("app-%d", i), Key: fmt.Sprintf("key-%d", i), Secret: "s"}
	}
	return out
}

// TestStaticApps: the file and the environment's store (herald.StaticApps) keeps the same
// contract as the database stores.
func TestStaticApps(t *testing.T) {
	list := []herald.App{{ID: "a", Key: "ka", Secret: "s"}, {ID: "b", Key: "kb", Secret: "s", Limits: herald.Limits{MaxConnections: 3}}}
	appstoretest.Contract(t, herald.NewStaticApps(list), list)
}

// TestStoreContract: a Store keeps the herald.AppStore contract; an unchanged app keeps its
// pointer across reloads, a changed one gets a new one and is reported.
func TestStoreContract(t *testing.T) {
	src := &listSource{apps: apps(3)}
	var got []herald.AppChange
	s := appstore.New(appstore.Config{OnChange: func(c []herald.AppChange) { got = append(got, c...) }})
	if err := s.Start(src); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appstoretest.Contract(t, s, src.apps)
	before, _ := s.AppByID("app-0")
	src.mu.Lock()
	src.apps[1].Disabled = true
	src.apps = src.apps[:2]
	src.mu.Unlock()
	got = nil
	if err := s.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.AppByID("app-0"); after != before {
		t.Error("an unchanged app got a new pointer")
	}
	if len(got) != 2 || got[0].New == nil || !got[0].New.Disabled || got[1].New != nil || got[1].Old.ID != "app-2" {
		t.Errorf("changes %+v, want app-1 disabled and app-2 removed", got)
	}
	src.mu.Lock()
	src.down = true
	src.mu.Unlock()
	if err := s.Reload(context.Background()); err == nil || !s.Stale() {
		t.Errorf("Reload with the source down: %v, stale %v", err, s.Stale())
	}
	if _, ok := s.AppByKey("key-0"); !ok {
		t.Error("a known app is not served with the source down")
	}
}

// BenchmarkAppByKey is the lookup of every connection and REST call, among 10,000 apps:
// one atomic load and one map read, no lock.
func BenchmarkAppByKey(b *testing.B) {
	src := &listSource{apps: apps(10_000)}
	s := appstore.New(appstore.Config{})
	if err := s.Start(src); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i*9)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := s.AppByKey(keys[i&1023]); !ok {
				b.Fatal("not found")
			}
			i++
		}
	})
}

// TestAppByKeyAllocs pins the lookup at no allocation.
func TestAppByKeyAllocs(t *testing.T) {
	s := appstore.New(appstore.Config{})
	if err := s.Start(&listSource{apps: apps(100)}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := testing.AllocsPerRun(1000, func() { s.AppByKey("key-7") }); n != 0 {
		t.Errorf("AppByKey allocates %v times", n)
	}
}
