package session

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/fanout"
)

// keepTransport keeps every byte written to it, for the test to read.
type keepTransport struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *keepTransport) Writev(bufs [][]byte) (int, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range bufs {
		r.buf.Write(b)
		n += len(b)
	}
	return n, false, nil
}
func (r *keepTransport) Shutdown()    {}
func (r *keepTransport) Close() error { return nil }

// count is how many frames of event name it has received.
func (r *keepTransport) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Count(r.buf.Bytes(), []byte(`"event":"`+name+`"`))
}

// stallTransport blocks its worker in Writev until release is closed: the worker stops
// taking commands and its queue fills, as behind a worker that cannot keep up.
type stallTransport struct {
	entered chan struct{}
	release chan struct{}
}

func (s *stallTransport) Writev(bufs [][]byte) (int, bool, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n, false, nil
}
func (s *stallTransport) Shutdown()    {}
func (s *stallTransport) Close() error { return nil }

// TestRefusedPublishDeliversNothing fills worker 1's queue behind a stalled connection and
// publishes to a channel with subscribers on both workers, then an event to two channels,
// one on each worker, then a batch: each is refused (CodeBusy) and must have reached no one,
// not even the subscribers of worker 0, whose queue has room. Once worker 1 runs again, the
// retries deliver every event exactly once. A fake transport stands in for sockets here: a
// real one never blocks its worker, so it cannot fill a queue on demand.
func TestRefusedPublishDeliversNothing(t *testing.T) {
	const inbox = 4
	h := testServer(t, Config{Workers: 2, InboxSize: inbox, PublishTimeout: 50 * time.Millisecond})
	onWorker := func(idx int, tr fanout.Transport) *conn { return h.attachFakeOn(idx, tr) }
	a0, b1 := &keepTransport{}, &keepTransport{}
	ca, cb := onWorker(0, a0), onWorker(1, b1)
	for _, ch := range []string{"both", "a"} {
		subscribeFake(t, h, ca, ch)
	}
	for _, ch := range []string{"both", "b", "fill"} {
		subscribeFake(t, h, cb, ch)
	}
	h.fence()

	stall := &stallTransport{entered: make(chan struct{}, 1), release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(stall.release)
		}
	}
	t.Cleanup(release)
	cs := onWorker(1, stall)
	h.eng.Send(&cs.Conn, []byte("x"))
	select {
	case <-stall.entered:
	case <-time.After(patience):
		t.Fatalf("waited %v for worker 1 to write to the stalled connection", patience)
	}
	// Worker 1 is stuck: publish to its channel until its queue is full and one is refused.
	filled := false
	for i := 0; i < 4*inbox && !filled; i++ {
		err := h.Publish("app-id", herald.Event{Name: "fill", Channel: "fill", Data: "{}"})
		if herald.CodeOf(err) == herald.CodeBusy {
			filled = true
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !filled {
		t.Fatalf("%d publishes to a stalled worker with a queue of %d were all accepted; want a refusal", 4*inbox, inbox)
	}

	refused := [][]herald.Event{
		{{Name: "one-channel", Channel: "both", Data: "1"}},
		{{Name: "two-channels", Channel: "a", Data: "2"}, {Name: "two-channels", Channel: "b", Data: "2"}},
		{{Name: "batch-1", Channel: "a", Data: "3"}, {Name: "batch-2", Channel: "both", Data: "3"}, {Name: "batch-3", Channel: "b", Data: "3"}},
	}
	names := []string{"one-channel", "two-channels", "batch-1", "batch-2", "batch-3"}
	for _, evs := range refused {
		if err := h.Publish("app-id", evs...); herald.CodeOf(err) != herald.CodeBusy {
			t.Fatalf("publishing %s with worker 1's queue full: %v; want CodeBusy", evs[0].Name, err)
		}
	}
	fenceWorker(t, h, 0)
	for _, name := range names {
		if n := a0.count(name); n != 0 {
			t.Fatalf("after a refused publish, the subscriber on worker 0 (whose queue had room) received %d %q events; want 0", n, name)
		}
	}

	release()
	h.fence()
	for _, name := range names {
		if a, b := a0.count(name), b1.count(name); a != 0 || b != 0 {
			t.Fatalf("after worker 1 ran again, refused %q reached %d and %d subscribers; want 0 and 0", name, a, b)
		}
	}
	for _, evs := range refused {
		if err := h.Publish("app-id", evs...); err != nil {
			t.Fatalf("retrying %s once the queues had room: %v", evs[0].Name, err)
		}
	}
	h.fence()
	want := map[string][2]int{ // received by the subscriber on worker 0, on worker 1
		"one-channel": {1, 1}, "two-channels": {1, 1}, "batch-1": {1, 0}, "batch-2": {1, 1}, "batch-3": {0, 1},
	}
	for _, name := range names {
		if a, b := a0.count(name), b1.count(name); a != want[name][0] || b != want[name][1] {
			t.Fatalf("after the retry, %q reached the subscribers on workers 0 and 1 %d and %d times; want %v", name, a, b, want[name])
		}
	}
	for i, n := range h.eng.HeldSlots() {
		if n != 0 {
			t.Fatalf("worker %d holds %d publish slots once idle; want 0 (a slot leaked)", i, n)
		}
	}
}

// fenceWorker returns once worker i has flushed everything queued before the call.
func fenceWorker(t *testing.T, h *Server, i int) {
	t.Helper()
	tr := &memTransport{fence: make(chan struct{}, 1)}
	c := h.attachFakeOn(i, tr)
	h.eng.Send(&c.Conn, fenceFrame)
	select {
	case <-tr.fence:
	case <-time.After(patience):
		t.Fatalf("waited %v for worker %d to flush", patience, i)
	}
}
