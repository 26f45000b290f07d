package ws

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// costly is a handler whose every flood message costs 50 µs of CPU, as a real message does,
// and which notes when the victim's one message arrives.
type costly struct {
	flood    atomic.Int64
	victimAt chan time.Time
}

func (h *costly) OnMessage(c *Conn, op Opcode, p []byte) {
	if string(p) == "victim" {
		h.victimAt <- time.Now()
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
// be read within one buffer's worth of the flooder's messages, not when the flood stops.
func TestFloodingClientDoesNotStarveItsPoller(t *testing.T) {
	h := &costly{victimAt: make(chan time.Time, 1)}
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
		nc, pre, err := Hijack(w, accept, nil, 5*time.Second)
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

	burst := bytes.Repeat(clientFrame(true, OpText, []byte("x"), testMask), 4096)
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
	deadline := time.Now().Add(5 * time.Second)
	for h.flood.Load() < 2000 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d flood messages handled in 5 s", h.flood.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	sent := time.Now()
	if err := victim.WriteText("victim"); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-h.victimAt:
		// One turn of the flooder is one 4 KiB read: about 600 messages, 30 ms of work.
		if d := at.Sub(sent); d > time.Second {
			t.Fatalf("the victim's message waited %v behind the flood", d)
		} else {
			t.Logf("the victim's message waited %v behind the flood (%d flood messages handled)", d, h.flood.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the victim's message was not read within 5 s of flooding (%d flood messages handled)", h.flood.Load())
	}
}
