package ws

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
)

// costly is a handler whose every flood message costs 50 µs of CPU, as a real message does,
// and which notes how many flood messages it had handled when the victim's one message
// arrived.
type costly struct {
	flood    atomic.Int64
	victimAt chan int64
}

func (h *costly) OnMessage(c *Conn, op Opcode, p []byte) {
	if string(p) == "victim" {
		h.victimAt <- h.flood.Load()
		return
	}
	h.flood.Add(1)
	for start := time.Now(); time.Since(start) < 50*time.Microsecond; {
	}
}
func (h *costly) OnProtocolError(c *Conn, code int, reason string) { c.Shutdown() }
func (h *costly) OnWritable(c *Conn)                               {}
func (h *costly) OnHangup(c *Conn)                                 { c.Close() }

// TestFloodingClientDoesNotStarveItsPoller: one client writes small frames far faster than they
// can be handled, so its socket never runs dry; another client on the same poller must still
// be read within a few buffers' worth of the flooder's messages, not when the flood stops.
// The wait is counted in flood messages handled (the poller is the only one, so the count is
// exact), not in time, which a busy machine stretches.
func TestFloodingClientDoesNotStarveItsPoller(t *testing.T) {
	h := &costly{victimAt: make(chan int64, 1)}
	e, err := NewEngine(Config{Pollers: 1, ReadBufferBytes: 4096}, h)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept, err := CheckHandshake(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		nc, pre, err := Hijack(w, accept, nil, waitFor)
		if err != nil {
			return
		}
		_, _ = e.Attach(nc, pre, func(*Conn) {})
	}))
	defer srv.Close()
	defer e.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	flooder, err := wstest.Dial(addr, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer flooder.Close()
	victim, err := wstest.Dial(addr, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()

	frame := clientFrame(true, OpText, []byte("x"), testMask)
	perRead := 4096 / len(frame) // flood messages in one read of the poller's buffer
	burst := bytes.Repeat(frame, 4096)
	stop := make(chan struct{})
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = flooder.Conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = flooder.Conn.Write(burst)
		}
	}()
	defer func() { close(stop); <-flooding }()

	// Wait until the flood has filled the socket: its reader is busy for good.
	poll.Until(t, waitFor, "2000 flood messages to be handled", func() (bool, string) {
		n := h.flood.Load()
		return n >= 2000, fmt.Sprint(n)
	})
	sentAt := h.flood.Load()
	if err := victim.WriteText("victim"); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-h.victimAt:
		// One turn of the flooder is one 4 KiB read: about 600 messages. The victim's frame
		// may land just after the poller looked, so allow a few turns; a starved victim
		// waits for the flood to stop, which it never does.
		if behind := at - sentAt; behind > int64(10*perRead) {
			t.Fatalf("the victim's message waited behind %d flood messages; want at most %d (ten reads)", behind, 10*perRead)
		} else {
			t.Logf("the victim's message waited behind %d flood messages (%d per read)", behind, perRead)
		}
	case <-time.After(waitFor):
		t.Fatalf("waited %v for the victim's message while flooding; it was not read (%d flood messages handled)", waitFor, h.flood.Load())
	}
}
