package session

import (
	"strings"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/ws"
)

// kernelTransport stands in for a socket whose kernel buffer has room bytes left: a write
// takes what fits, cutting a frame anywhere, and then reports the socket blocked. MakeRoom
// adds room, as ws.Conn.MakeRoom raises the send buffer.
type kernelTransport struct {
	recTransport
	room int
	made int // MakeRoom calls
}

func (k *kernelTransport) Writev(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		take := min(len(b), k.room-n)
		k.out = append(k.out, b[:take]...)
		n += take
		if take < len(b) {
			k.room -= n
			return n, true, nil
		}
	}
	k.room -= n
	return n, false, nil
}

func (k *kernelTransport) MakeRoom(n int) error {
	k.made++
	k.room += n
	return nil
}

// TestCutOffDropsQueuedFramesAndClosesNext fills a connection's kernel buffer and then its
// queue: the connection must be cut off with everything queued dropped except the rest of
// the frame the kernel took part of, then a pusher:error and a 4100 close frame, and be shut
// down; the stream it received must be whole frames.
func TestCutOffDropsQueuedFramesAndClosesNext(t *testing.T) {
	h := testServer(t, Config{Workers: 1, OutboundBufferBytes: 16 << 10})
	kt := &kernelTransport{room: 10_000} // not a multiple of the frame size: a frame is cut
	c := h.attachFake(kt)
	subscribeFake(t, h, c, "cut")
	h.fence()
	published := 0
	for h.Stats().SlowConsumers == 0 {
		if published == 100 {
			t.Fatalf("not cut off after %d events of 3,000 bytes with a 16 KiB bound", published)
		}
		if err := h.Publish("app-id", herald.Event{Name: "e", Channel: "cut", Data: strings.Repeat("x", 3000)}); err != nil {
			t.Fatal(err)
		}
		published++
		h.fence()
	}
	h.fence()
	sent := len(kt.out)
	for i := 0; i < 3; i++ { // nothing more may be queued behind the close frame
		if err := h.Publish("app-id", herald.Event{Name: "late", Channel: "cut", Data: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	h.fence()
	if len(kt.out) != sent {
		t.Fatalf("%d bytes written after the close frame", len(kt.out)-sent)
	}
	frames, err := splitFrames(kt.out)
	if err != nil {
		t.Fatalf("the stream is not whole frames: %v", err)
	}
	var events []string
	for _, f := range frames {
		if f.op == ws.OpClose {
			events = append(events, "close")
			continue
		}
		events = append(events, decodeFrame(f).Event)
	}
	n := len(events)
	if n < 3 || events[n-2] != "pusher:error" || events[n-1] != "close" || frames[n-1].payload[0] != 4100>>8 || frames[n-1].payload[1] != 4100&0xFF {
		t.Fatalf("the stream ends %v; want events, then pusher:error and close 4100", events[max(0, n-4):])
	}
	got := 0
	for _, e := range events {
		if e == "e" {
			got++
		}
	}
	if got >= published || got < 3 {
		t.Fatalf("%d of %d events reached the client: want the ones the kernel took (at least 3), not the queued ones", got, published)
	}
	if !kt.shut || kt.made != 1 {
		t.Fatalf("shut down %v after %d MakeRoom calls; want shut down after one", kt.shut, kt.made)
	}
	t.Logf("%d events published, %d reached the client before pusher:error and close 4100", published, got)
}
