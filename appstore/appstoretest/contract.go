package appstoretest

import (
	"reflect"
	"sync"
	"testing"

	"github.com/herald-rt/herald"
)

// Contract checks that store holds exactly apps (their zero limits read as the defaults):
// each found by id and by key, unknown ones not found, each listed once, and lookups safe
// from many goroutines at once.
func Contract(t *testing.T, store herald.AppStore, apps []herald.App) {
	t.Helper()
	for _, want := range apps {
		want.Limits = want.Limits.WithDefaults()
		byID, ok := store.AppByID(want.ID)
		if !ok {
			t.Errorf("AppByID(%q): not found", want.ID)
			continue
		}
		if !reflect.DeepEqual(*byID, want) {
			t.Errorf("AppByID(%q) = %+v, want %+v", want.ID, *byID, want)
		}
		byKey, ok := store.AppByKey(want.Key)
		if !ok || byKey != byID {
			t.Errorf("AppByKey(%q) = %v, %v; want the app AppByID returns", want.Key, byKey, ok)
		}
	}
	if a, ok := store.AppByID("no-such-app"); ok || a != nil {
		t.Errorf("AppByID(unknown) = %v, %v; want nil, false", a, ok)
	}
	if a, ok := store.AppByKey("no-such-key"); ok || a != nil {
		t.Errorf("AppByKey(unknown) = %v, %v; want nil, false", a, ok)
	}
	listed := map[string]int{}
	for _, a := range store.Apps() {
		listed[a.ID]++
	}
	if len(listed) != len(apps) {
		t.Errorf("Apps() lists %d apps, want %d", len(listed), len(apps))
	}
	for _, a := range apps {
		if listed[a.ID] != 1 {
			t.Errorf("Apps() lists %q %d times, want once", a.ID, listed[a.ID])
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := 0; i < 1000; i++ {
				a := apps[i%len(apps)]
				if _, ok := store.AppByKey(a.Key); !ok {
					t.Errorf("concurrent AppByKey(%q): not found", a.Key)
					return
				}
				_ = store.Apps()
			}
		})
	}
	wg.Wait()
}
