package hub

import (
	"testing"

	"github.com/herald-rt/herald"
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
	return &herald.App{ID: "app-id", Key: "app-key", Secret: "app-secret", EnableClientMessages: true,
		EnableUserAuthentication: true, Limits: herald.DefaultLimits}
}

func newTestHub(tb testing.TB, cfg Config) *Hub {
	tb.Helper()
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 1 << 20
	}
	h, err := New(cfg, []*herald.App{testApp()}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Shutdown(tb.Context()) })
	return h
}

// attachFake registers a connection with a fake transport, as ServeWS does for a socket.
func (h *Hub) attachFake(t transport) *Conn {
	a := h.apps["app-id"]
	h.conns.Add(1)
	a.conns.Add(1)
	num := h.nextNum.Add(1)
	c := &Conn{app: a, num: num, sid: "1." + string(rune('0'+num%10)), t: t}
	c.w = h.workers[num%uint64(len(h.workers))]
	c.m = &a.counters[num%uint64(len(h.workers))]
	c.lastSeen.Store(h.now())
	c.w.inbox <- cmd{op: opAttach, c: c}
	return c
}

// fence returns once every worker has flushed everything queued before the call. Its
// connections are made once per hub so that the fence itself allocates nothing.
func (h *Hub) fence() {
	if h.fences == nil {
		for _, w := range h.workers {
			h.fences = append(h.fences, &Conn{t: &memTransport{fence: make(chan struct{}, 1)}, w: w, m: &counters{}})
		}
	}
	for _, c := range h.fences {
		c.w.inbox <- cmd{op: opSend, c: c, frame: fenceFrame}
		<-c.t.(*memTransport).fence
	}
}

var fenceFrame = []byte{0}

func subscribeFake(tb testing.TB, h *Hub, c *Conn, channel string) {
	tb.Helper()
	h.subscribe(c, pusher.Message{Event: "pusher:subscribe", Data: []byte(`{"channel":"` + channel + `"}`)})
}
