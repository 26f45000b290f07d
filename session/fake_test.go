package session

import (
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/fanout"
	"github.com/herald-rt/herald/pusher"
)

// memTransport accepts every write; it is only touched by the conn's worker.
type memTransport struct {
	bytes int
	fence chan struct{}
}

func (m *memTransport) Writev(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	m.bytes += n
	if m.fence != nil {
		m.fence <- struct{}{}
	}
	return n, false, nil
}
func (m *memTransport) Shutdown()    {}
func (m *memTransport) Close() error { return nil }

func testApp() *herald.App {
	// The fakes subscribe and unsubscribe in loops (benchmarks, allocation counts): no rate.
	lim := herald.DefaultLimits
	lim.MaxSubscriptionsPerSecond = 1 << 30
	return &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret", EnableClientMessages: true,
		EnableUserAuthentication: true, Limits: lim}
}

// apps is an AppStore over a fixed list, as herald.StaticApps without its copies.
type apps []*herald.App

func (l apps) AppByID(id string) (*herald.App, bool) {
	for _, a := range l {
		if a.ID == id {
			return a, true
		}
	}
	return nil, false
}

func (l apps) AppByKey(key string) (*herald.App, bool) {
	for _, a := range l {
		if a.Key == key {
			return a, true
		}
	}
	return nil, false
}

func (l apps) Apps() []*herald.App { return l }

// local builds a single node's state configured with cfg.
func local(cfg cluster.Config) NewState {
	return func(eng *fanout.Engine) cluster.State { return cluster.NewLocal(cfg, eng) }
}

// testServer is newTestServer with the test app and a cluster configuration of cfg's
// publish timeout.
func testServer(tb testing.TB, cfg Config) *Server {
	return newTestServer(tb, cfg, cluster.Config{PublishTimeout: cfg.PublishTimeout}, testApp())
}

// newTestServer starts a single node serving as, its state configured with ccfg.
func newTestServer(tb testing.TB, cfg Config, ccfg cluster.Config, as ...*herald.App) *Server {
	tb.Helper()
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 1 << 20
	}
	s, err := New(cfg, apps(as), local(ccfg), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Shutdown(tb.Context()) })
	return s
}

// attachFake registers a connection with a fake transport, as ServeWS does for a socket.
func (s *Server) attachFake(t fanout.Transport) *conn {
	a := s.state("app-id")
	s.eng.Claim()
	a.g.Claim()
	c := &conn{app: a}
	s.eng.Init(&c.Conn, a.g)
	s.eng.Attach(&c.Conn, t)
	return c
}

// attachFakeOn is attachFake on worker idx: the connections numbered for the other workers
// meanwhile are never attached.
func (s *Server) attachFakeOn(idx int, t fanout.Transport) *conn {
	a := s.state("app-id")
	c := &conn{app: a}
	for s.eng.Init(&c.Conn, a.g); c.Worker() != idx; s.eng.Init(&c.Conn, a.g) {
	}
	s.eng.Claim()
	a.g.Claim()
	s.eng.Attach(&c.Conn, t)
	return c
}

// fence returns once every worker has flushed everything queued before the call. It
// allocates nothing.
func (s *Server) fence() { s.eng.Sync() }

var fenceFrame = []byte{0}

func subscribeFake(tb testing.TB, s *Server, c *conn, channel string) {
	tb.Helper()
	s.subscribe(c, pusher.Message{Event: "pusher:subscribe", Data: []byte(`{"channel":"` + channel + `"}`)})
}
