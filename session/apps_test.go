package session_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/herald-rt/herald/broker/memory"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/session"
)

// changingStore is an AppStore whose apps the test changes, as an appstore.Store does when
// its database changes: a new App for each change, and the changes handed to the server.
type changingStore struct {
	mu    sync.Mutex
	apps  map[string]*herald.App
	stale atomic.Bool
	h     *session.Server
}

func (s *changingStore) AppByID(id string) (*herald.App, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.apps[id]
	return a, ok
}

func (s *changingStore) AppByKey(key string) (*herald.App, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.apps {
		if a.Key == key {
			return a, true
		}
	}
	return nil, false
}

func (s *changingStore) Apps() []*herald.App {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*herald.App
	for _, a := range s.apps {
		out = append(out, a)
	}
	return out
}

func (s *changingStore) Stale() bool { return s.stale.Load() }

// set puts app (nil: deletes id) and tells the server.
func (s *changingStore) set(id string, app *herald.App) {
	s.mu.Lock()
	old := s.apps[id]
	if app == nil {
		delete(s.apps, id)
	} else {
		s.apps[id] = app
	}
	s.mu.Unlock()
	s.h.AppsChanged([]herald.AppChange{{Old: old, New: app}})
}

func serveStore(t *testing.T, store *changingStore) string {
	t.Helper()
	return serveStoreState(t, store, local(cluster.Config{}))
}

// serveStoreState is serveStore on the state newState builds.
func serveStoreState(t *testing.T, store *changingStore, newState session.NewState) string {
	t.Helper()
	return serveStoreConfig(t, store, session.Config{MaxConnections: 1000}, newState)
}

// serveStoreConfig is serveStoreState configured by cfg.
func serveStoreConfig(t *testing.T, store *changingStore, cfg session.Config, newState session.NewState) string {
	t.Helper()
	h, err := session.New(cfg, store, newState, nil)
	if err != nil {
		t.Fatal(err)
	}
	store.h = h
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /app/{key}", func(w http.ResponseWriter, r *http.Request) { h.ServeWS(w, r, r.PathValue("key")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: patience}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		_ = h.Shutdown(t.Context())
	})
	return ln.Addr().String()
}

// connected dials key and waits for its socket id.
func connected(t *testing.T, addr, key string) *wstest.Client {
	t.Helper()
	c, err := wstest.Dial(addr, "/app/"+key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.SocketID(patience); err != nil {
		t.Fatalf("connecting with key %s: %v", key, err)
	}
	return c
}

// refused dials key and returns the close code it is refused with.
func refused(t *testing.T, addr, key string) int {
	t.Helper()
	c, err := wstest.Dial(addr, "/app/"+key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	code, err := c.ExpectClose(patience)
	if err != nil {
		t.Fatalf("key %s: %v", key, err)
	}
	return code
}

// TestAppsChangeWhileServing: apps added, changed, disabled and deleted while the server
// runs: a new app's key connects, a disabled app's connections are closed with 4003 and
// new ones refused with it, a deleted app's closed with 4001, a changed limit applies to the
// next connection, and an unknown key while the store is stale is refused with 4100.
func TestAppsChangeWhileServing(t *testing.T) {
	a := &herald.App{ID: "a", Key: "a-key", Secret: "s"}
	store := &changingStore{apps: map[string]*herald.App{"a": a}}
	addr := serveStore(t, store)
	ca := connected(t, addr, "a-key")

	if code := refused(t, addr, "b-key"); code != 4001 {
		t.Fatalf("an unknown key: close %d, want 4001", code)
	}
	store.set("b", &herald.App{ID: "b", Key: "b-key", Secret: "s"})
	cb := connected(t, addr, "b-key")

	// A limit lowered to the connections open: the next is refused (4004), those open stay.
	store.set("b", &herald.App{ID: "b", Key: "b-key", Secret: "s", Limits: herald.Limits{MaxConnections: 1}})
	if code := refused(t, addr, "b-key"); code != 4004 {
		t.Fatalf("b over its new quota: close %d, want 4004", code)
	}

	store.set("a", &herald.App{ID: "a", Key: "a-key", Secret: "s", Disabled: true})
	if code, err := ca.ExpectClose(patience); err != nil || code != 4003 {
		t.Fatalf("a's connection after a was disabled: close %d, %v; want 4003", code, err)
	}
	if code := refused(t, addr, "a-key"); code != 4003 {
		t.Fatalf("a disabled app's key: close %d, want 4003", code)
	}

	store.set("b", nil)
	if code, err := cb.ExpectClose(patience); err != nil || code != 4001 {
		t.Fatalf("b's connection after b was deleted: close %d, %v; want 4001", code, err)
	}

	store.set("a", &herald.App{ID: "a", Key: "a-key", Secret: "s"})
	connected(t, addr, "a-key")
	store.stale.Store(true)
	if code := refused(t, addr, "c-key"); code != 4100 {
		t.Fatalf("an unknown key while the store is stale: close %d, want 4100", code)
	}
	connected(t, addr, "a-key") // known apps are served all the same
}

// TestAppLearnedLateGetsRemotePresence: in a cluster, a node that learns of a new app after
// another node's clients joined its presence channel (its poll came later), and so dropped
// their records, has those members once it knows the app: adding it, it asks every node for
// its share of the state.
func TestAppLearnedLateGetsRemotePresence(t *testing.T) {
	bus := memory.NewBus()
	onBus := func(id string) session.NewState {
		mux := new(broker.Mux)
		b := bus.Attach(memory.Config{NodeID: id}, mux.Receive)
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		return func(eng *fanout.Engine) cluster.State {
			return cluster.NewReplicated(cluster.Config{}, eng, b, memory.NewHistory(b), mux.Handle, nil)
		}
	}
	early := &changingStore{apps: map[string]*herald.App{app.ID: app}}
	witness := &changingStore{apps: map[string]*herald.App{app.ID: app}}
	late := &changingStore{apps: map[string]*herald.App{}}
	addr := serveStoreState(t, early, onBus("early"))
	serveStoreState(t, witness, onBus("witness"))
	serveStoreState(t, late, onBus("late"))

	c2, err := wstest.Dial(addr, "/app/"+app.Key+"?protocol=7")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	sid, err := c2.SocketID(patience)
	if err != nil {
		t.Fatal(err)
	}
	auth, data := presenceAuth(sid, "presence-late", "u1")
	if err := c2.Subscribe("presence-late", auth, data); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
		t.Fatal(err)
	}
	// Once a node that knows the app has the member, the late node has had (and dropped) the
	// record too.
	poll.Until(t, patience, "the witness to know u1 in presence-late", func() (bool, string) {
		u := witness.h.Users(app.ID, "presence-late")
		return slices.Equal(u, []string{"u1"}), fmt.Sprint(u)
	})
	late.set(app.ID, app) // the late node's poll finds the app
	poll.Until(t, patience, "the late node to know u1 in presence-late", func() (bool, string) {
		u := late.h.Users(app.ID, "presence-late")
		return slices.Equal(u, []string{"u1"}), fmt.Sprint(u)
	})
}
