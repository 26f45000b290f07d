package ws

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

// stallTimeout is the frame timeout these tests run with: short, so a test takes a moment.
const stallTimeout = 300 * time.Millisecond

// declared returns a masked client frame header that announces n payload bytes, followed by
// the first k of them.
func declared(op Opcode, fin bool, n uint64, k int) []byte {
	return longFrame(op, fin, n, pattern(k))[:14+k]
}

// TestStalledFrameClosed sends frames that start and never finish, over real sockets: each
// connection must get a 1008 within about the frame timeout, not hold on until the activity
// and pong timeouts (150 s at herald's defaults).
func TestStalledFrameClosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"header announces 65,536 bytes, 100 arrive", declared(OpText, true, 65536, 100)},
		{"1 byte of a header", []byte{0x81}},
		{"a complete frame, then a header alone", append(clientFrame(true, OpText, []byte("hi"), testMask), declared(OpBinary, true, 1000, 0)...)},
		{"first fragment of a message, then nothing", clientFrame(false, OpText, pattern(100), testMask)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, Config{FrameTimeout: stallTimeout})
			cl, o := hs.dial()
			start := time.Now()
			if _, err := cl.Conn.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			e := hs.next(o, evProtocolError)
			took := time.Since(start)
			if e.code != ClosePolicy {
				t.Fatalf("protocol error %d %q; want %d", e.code, e.reason, ClosePolicy)
			}
			if took < stallTimeout-10*time.Millisecond || took > stallTimeout+2*time.Second {
				t.Fatalf("closed after %v; want about the frame timeout %v", took, stallTimeout)
			}
			if code, err := expectCloseFrame(cl); err != nil || code != ClosePolicy {
				t.Fatalf("client read close %d, err %v; want %d", code, err, ClosePolicy)
			}
			hs.next(o, evHangup)
			t.Logf("closed %v after the first byte", took.Round(time.Millisecond))
		})
	}
}

// expectCloseFrame reads frames until a close frame and returns its code.
func expectCloseFrame(cl *wstest.Client) (int, error) {
	for {
		f, err := cl.ReadFrame(waitFor)
		if err != nil {
			return 0, err
		}
		if f.Op == byte(OpClose) {
			return f.CloseCode(), nil
		}
	}
}

// TestStalledFrameInHandshakePacket sends the start of a frame in the same write as the
// handshake request: the bytes arrive with the handshake and are parsed by Attach, before the
// poller ever reads the socket, and the timeout must hold for them too.
func TestStalledFrameInHandshakePacket(t *testing.T) {
	hs := newHarness(t, Config{FrameTimeout: stallTimeout})
	nc, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var k [16]byte
	_, _ = rand.Read(k[:])
	req := "GET / HTTP/1.1\r\nHost: " + hs.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(k[:]) + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	start := time.Now()
	if _, err := nc.Write(append([]byte(req), declared(OpText, true, 65536, 50)...)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	o := hs.owner()
	if n := <-hs.preLen; n == 0 {
		t.Fatalf("the frame's bytes did not arrive with the handshake: the test did not test Attach's parse")
	}
	e := hs.next(o, evProtocolError)
	took := time.Since(start)
	if e.code != ClosePolicy || took > stallTimeout+2*time.Second {
		t.Fatalf("protocol error %d %q after %v; want %d within about %v", e.code, e.reason, took, ClosePolicy, stallTimeout)
	}
	hs.next(o, evHangup)
}

// TestSteadySenderNotCut sends, for several frame timeouts, frames that each complete well
// within the timeout but are split across writes so that every read ends inside a frame:
// the connection always has a frame in progress, never the same one for long, and must not
// be cut.
func TestSteadySenderNotCut(t *testing.T) {
	hs := newHarness(t, Config{FrameTimeout: stallTimeout})
	cl, o := hs.dial()
	go func() { // the echoes: keep reading so nothing backs up
		for {
			if _, err := cl.ReadFrame(waitFor); err != nil {
				return
			}
		}
	}()
	const frames = 40 // 40 x 30 ms = 1.2 s = 4 frame timeouts
	var msgs [][]byte
	for i := 0; i < frames; i++ {
		msgs = append(msgs, clientFrame(true, OpBinary, pattern(1000+i), testMask))
	}
	half := func(i int) int { return len(msgs[i]) / 2 }
	if _, err := cl.Conn.Write(msgs[0][:half(0)]); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(30 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < frames; i++ {
		<-tick.C // pacing the sender, not waiting for a result
		out := msgs[i][half(i):]
		if i+1 < frames {
			out = append(out[:len(out):len(out)], msgs[i+1][:half(i+1)]...)
		}
		if _, err := cl.Conn.Write(out); err != nil {
			t.Fatalf("write %d: %v (engine: %v)", i, err, hs.next(o, evProtocolError))
		}
	}
	for i := 0; i < frames; i++ {
		e := hs.next(o, evMessage)
		if len(e.payload) != 1000+i {
			t.Fatalf("message %d: %d bytes; want %d", i, len(e.payload), 1000+i)
		}
	}
	select {
	case e := <-hs.h.events:
		if e.kind == evProtocolError {
			t.Fatalf("a steady sender was cut: %d %q", e.code, e.reason)
		}
	default:
	}
}

// FuzzFrameTimeoutTracking feeds arbitrary bytes in reads of a fuzzed size and checks, after
// every read, that the frame timeout's bookkeeping matches what the connection holds: a
// start time exactly while a frame or a fragmented message is incomplete, and the poller's
// count of such connections in step.
func FuzzFrameTimeoutTracking(f *testing.F) {
	for _, s := range append(fuzzSeeds(), abuseSeeds()...) {
		f.Add(s, uint8(7))
	}
	f.Add(declared(OpText, true, 65536, 100), uint8(30))
	f.Add(clientFrame(false, OpText, []byte("a"), testMask), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, read uint8) {
		size := int(read) + 1
		p := &poller{e: &Engine{cfg: Config{MaxMessageBytes: fuzzMax, FrameTimeout: time.Minute}, h: &nopHandler{}, start: time.Now()}}
		c := &Conn{p: p}
		for len(data) > 0 {
			k := min(size, len(data))
			p.feed(c, slices.Clone(data[:k]))
			data = data[k:]
			busy := !c.broken && (len(c.partial()) > 0 || c.msgOp != 0)
			if busy != (c.since != 0) {
				t.Fatalf("busy %v (rbuf %d, message op %d, broken %v) but since %d", busy, len(c.partial()), c.msgOp, c.broken, c.since)
			}
			want := int32(0)
			if busy {
				want = 1
			}
			if got := p.timed.Load(); got != want {
				t.Fatalf("busy %v but the poller counts %d connections with a frame in progress", busy, got)
			}
		}
	})
}

// BenchmarkFeed parses what one read brings: 64 small complete client frames, or frames that
// straddle reads (the case the frame timeout's bookkeeping runs for).
func BenchmarkFeed(b *testing.B) {
	frame := clientFrame(true, OpBinary, pattern(100), testMask)
	whole := slices.Repeat(frame, 64)
	for _, tc := range []struct {
		name  string
		split int // bytes of the second read; 0: one read
	}{{"complete", 0}, {"straddling", 50}} {
		b.Run(tc.name, func(b *testing.B) {
			p := &poller{e: &Engine{cfg: Config{MaxMessageBytes: 64 << 10}, h: &nopHandler{}, start: time.Now()}}
			c := &Conn{p: p}
			in := make([]byte, len(whole))
			b.ReportAllocs()
			b.SetBytes(int64(len(whole)))
			for b.Loop() {
				copy(in, whole)
				if tc.split == 0 {
					p.feed(c, in)
					continue
				}
				cut := len(in) - tc.split
				p.feed(c, in[:cut])
				p.feed(c, in[cut:])
			}
		})
	}
}
