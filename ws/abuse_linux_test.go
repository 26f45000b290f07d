//go:build linux && !heraldportable

package ws

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/herald-rt/herald/internal/poll"
)

// TestMemoryPerConnectionBounded holds the worst a client can make a connection keep over
// real sockets: a fragmented message just under the limit plus a continuation frame that
// declares the whole limit and stops one byte short. The engine must hold no more than
// parseBounds allows (one incomplete frame and one message's fragments, with their growth:
// 3x the limit at a 64 KiB limit and 64 KiB reads, 2x when the frame arrives in pieces), and a connection that declares a huge
// length must hold nothing, however many bytes follow.
func TestMemoryPerConnectionBounded(t *testing.T) {
	const (
		limit = 64 << 10
		conns = 32
	)
	h := &nopHandler{}
	e, err := NewEngine(Config{Pollers: 2, MaxMessageBytes: limit}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	type pair struct {
		c      *Conn
		client net.Conn
	}
	var held, huge []pair
	for i := 0; i < 2*conns; i++ {
		server, client := tcpPair(t)
		defer client.Close()
		c, err := e.Attach(server, nil, func(*Conn) {})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 0 {
			held = append(held, pair{c, client})
		} else {
			huge = append(huge, pair{c, client})
		}
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	first := clientFrame(false, OpText, pattern(limit-1), testMask)
	cont := longFrame(OpContinuation, true, limit, pattern(limit-1))
	junk := make([]byte, 1<<20)
	for _, p := range held {
		if _, err := p.client.Write(slices.Concat(first, cont)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range huge {
		if _, err := p.client.Write(longFrame(OpBinary, true, math.MaxInt64, nil)); err != nil {
			t.Fatal(err)
		}
		// The server keeps reading (and discarding) after the protocol error: 1 MiB more.
		_ = p.client.SetWriteDeadline(time.Now().Add(waitFor))
		if _, err := p.client.Write(junk); err != nil {
			t.Fatal(err)
		}
	}
	// Every byte sent has been read by the engine once the servers' receive queues are
	// empty; stopping the engine then waits until the pollers have parsed them.
	all := slices.Concat(held, huge)
	poll.Until(t, waitFor, "every byte sent to be read by the engine", func() (bool, string) {
		for _, p := range all {
			if n := unread(t, p.c.fd); n > 0 {
				return false, fmt.Sprintf("fd %d: %d bytes unread", p.c.fd, n)
			}
		}
		return true, ""
	})
	e.Close()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	_, rbufCap, msgCap := parseBounds(limit, e.cfg.ReadBufferBytes)
	worst := 0
	for _, p := range held {
		c := p.c
		if c.broken || len(c.fragments()) != limit-1 || len(c.partial()) != 14+limit-1 {
			t.Fatalf("fd %d: broken %v, holding msg %d and rbuf %d bytes; the test did not build what it meant to",
				c.fd, c.broken, len(c.fragments()), len(c.partial()))
		}
		if cap(c.partial()) > rbufCap || cap(c.fragments()) > msgCap {
			t.Errorf("fd %d: rbuf cap %d (bound %d), msg cap %d (bound %d)", c.fd, cap(c.partial()), rbufCap, cap(c.fragments()), msgCap)
		}
		worst = max(worst, cap(c.partial())+cap(c.fragments()))
	}
	for _, p := range huge {
		if c := p.c; !c.broken || c.rbuf != nil || c.msg != nil {
			t.Errorf("fd %d declared 2^63-1 bytes: broken %v, holding rbuf %d msg %d", c.fd, c.broken, len(c.partial()), len(c.fragments()))
		}
	}
	if code := h.code.Load(); code != CloseTooBig {
		t.Errorf("protocol error %d, want 1009", code)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	perConn := grown / conns
	t.Logf("message limit %d: worst connection holds %d bytes of buffers; heap grew %d bytes, %d per holding connection",
		limit, worst, grown, perConn)
	if bound := int64(rbufCap + msgCap); perConn > bound {
		t.Errorf("heap grew %d bytes per connection, over the bound %d", perConn, bound)
	}
	for _, p := range all {
		runtime.KeepAlive(p.c)
	}
}

// unread returns the bytes in a socket's receive queue (FIONREAD).
func unread(t *testing.T, fd int) int {
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("FIONREAD on %d: %v", fd, e)
	}
	return int(n)
}

// TestCloseFramePayloadValidated checks what RFC 6455 requires of a close frame's payload
// (§5.5.1, §7.4): none, or a 2-byte status code that may be sent followed by a UTF-8 reason.
func TestCloseFramePayloadValidated(t *testing.T) {
	for _, tc := range []struct {
		payload []byte
		code    int // 0: delivered as a close frame
	}{
		{nil, 0},
		{[]byte{0x03, 0xe8}, 0},
		{[]byte{0x03, 0xe8, 'o', 'k'}, 0},
		{[]byte{0x0f, 0xa0}, 0}, // 4000
		{[]byte{0x03}, CloseProtocolError},
		{[]byte{0x00, 0x00}, CloseProtocolError},
		{[]byte{0x03, 0xe7}, CloseProtocolError}, // 999
		{[]byte{0x03, 0xec}, CloseProtocolError}, // 1004
		{[]byte{0x03, 0xed}, CloseProtocolError}, // 1005: no status code, never on the wire
		{[]byte{0x03, 0xee}, CloseProtocolError}, // 1006: abnormal closure, never on the wire
		{[]byte{0x0b, 0xb7}, CloseProtocolError}, // 2999
		{[]byte{0x13, 0x88}, CloseProtocolError}, // 5000
		{[]byte{0x03, 0xe8, 0xff}, CloseInvalidData},
	} {
		events, bad := parseChunks(clientFrame(true, OpClose, tc.payload, testMask))
		if len(bad) > 0 {
			t.Fatal(bad)
		}
		want := fmt.Sprintf("msg %d %q", OpClose, tc.payload)
		if tc.code != 0 {
			want = fmt.Sprintf("error %d", tc.code)
		}
		if len(events) != 1 || !strings.HasPrefix(events[0], want) {
			t.Errorf("close payload % x: %q, want %s", tc.payload, events, want)
		}
	}
}

// TestPreBufferedThenPolled sends frames with the handshake request, one of them cut short, then
// ends the stream: Attach parses them on the caller's goroutine (the HTTP handler's), and the
// poller reads the end of the stream and reports the hang-up. Under -race it checks that the two
// are ordered: Attach must publish the connection in the descriptor table (the atomic the poller
// loads) only after parsing the pre-buffered bytes. Until the admission-control work it published
// it before, and the race detector reported the poller's hang-up against Attach's parse (rbuf, msg,
// the handler's state); a poller holding a stale event for the descriptor's previous connection
// could even read c while Attach parsed.
func TestPreBufferedThenPolled(t *testing.T) {
	ae := newAbuseEngine(t)
	data := slices.Concat(clientFrame(true, OpText, []byte("with the handshake"), testMask),
		clientFrame(true, OpText, []byte("cut short"), testMask)[:8])
	a, _ := ae.run(t, 0, data, len(data))
	if a.pre != len(data) {
		t.Fatalf("%d of %d bytes came with the handshake: the test did not test what it should", a.pre, len(data))
	}
	want := []string{fmt.Sprintf("msg %d %q", OpText, "with the handshake")}
	if !slices.Equal(a.rec.events, want) {
		t.Fatalf("delivered %q, want %q", a.rec.events, want)
	}
}

// abuseEngine is an engine behind a real HTTP server, shared by every input of a fuzz
// process. Its handler records what the engine delivers in the parse model's notation,
// answers each close frame with a close frame, and each protocol error with a close frame
// carrying the code and a shutdown. Writes happen on the poller goroutine, the connection's
// only user.
type abuseEngine struct {
	e        *Engine
	srv      *httptest.Server
	attached chan *abuseConn
}

type abuseConn struct {
	pre     int // bytes that came with the handshake request
	rec     recorder
	hangups int
	written []byte // what the handler wrote
	werr    error
	done    chan struct{} // closed on the hang-up
}

type abuseHandler struct{}

func (abuseHandler) write(c *Conn, frame []byte) {
	a := c.Data.(*abuseConn)
	n, blocked, err := c.Writev([][]byte{frame})
	a.written = append(a.written, frame[:n]...)
	if blocked || err != nil {
		a.werr = errors.Join(a.werr, fmt.Errorf("writev: %d of %d bytes, blocked %v, %w", n, len(frame), blocked, err))
	}
}

func (h abuseHandler) OnMessage(c *Conn, op Opcode, p []byte) {
	c.Data.(*abuseConn).rec.OnMessage(c, op, p)
	if op == OpClose {
		h.write(c, CloseFrame(CloseNormal, ""))
	}
}

func (h abuseHandler) OnProtocolError(c *Conn, code int, reason string) {
	c.Data.(*abuseConn).rec.OnProtocolError(c, code, reason)
	h.write(c, CloseFrame(code, reason))
	c.Shutdown()
}

func (abuseHandler) OnWritable(*Conn) {}

func (abuseHandler) OnHangup(c *Conn) {
	a := c.Data.(*abuseConn)
	a.hangups++
	_ = c.Close()
	close(a.done)
}

func newAbuseEngine(tb testing.TB) *abuseEngine {
	e, err := NewEngine(Config{Pollers: 2, MaxMessageBytes: fuzzMax}, abuseHandler{})
	if err != nil {
		tb.Fatal(err)
	}
	ae := &abuseEngine{e: e, attached: make(chan *abuseConn, 1)}
	ae.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept, err := CheckHandshake(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		nc, pre, err := Hijack(w, accept, nil, waitFor)
		if err != nil {
			return
		}
		a := &abuseConn{pre: len(pre), done: make(chan struct{})}
		if _, err := e.Attach(nc, pre, func(c *Conn) { c.Data = a }); err != nil {
			return
		}
		ae.attached <- a
	}))
	tb.Cleanup(func() {
		ae.srv.Close()
		e.Close()
	})
	return ae
}

// abuseDialers spread the fuzz clients over 127.0.0.2-33: each input is a connection, and the
// client side closes first, leaving a TIME_WAIT.
var abuseDialers = func() (ds [32]net.Dialer) {
	for i := range ds {
		ds[i] = net.Dialer{
			Timeout:   waitFor,
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))},
			Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) {
					serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, 24 /* IP_BIND_ADDRESS_NO_PORT */, 1)
				})
				return errors.Join(err, serr)
			},
		}
	}
	return ds
}()

// run sends the handshake followed by data[:early] in one write (those bytes usually reach
// the engine as pre-buffered bytes), then the rest once the handshake is answered, then ends
// its side of the stream. It returns what the engine delivered and what the client read.
func (ae *abuseEngine) run(t *testing.T, seq int, data []byte, early int) (*abuseConn, []byte) {
	nc, err := abuseDialers[seq%len(abuseDialers)].Dial("tcp", ae.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(waitFor))
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := nc.Write(append([]byte(req), data[:early]...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	// The server may already have shut the connection down: a failed write is fine. The
	// rest goes before the test waits for the attachment, and only if there is a rest: a
	// write after the wait would order the poller's next read after Attach for the race
	// detector (syscall.Read and Write synchronize), hiding a missing order between them.
	if early < len(data) {
		_, _ = nc.Write(data[early:])
	}
	_ = nc.(*net.TCPConn).CloseWrite()
	var a *abuseConn
	select {
	case a = <-ae.attached:
	case <-time.After(waitFor):
		t.Fatal("no connection attached")
	}
	got, err := io.ReadAll(br)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading the server's frames: %v", err)
	}
	select {
	case <-a.done:
	case <-time.After(waitFor):
		t.Fatal("the engine never reported the hang-up")
	}
	return a, got
}

// serverFrames splits what the client read into unmasked server frames.
func serverFrames(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 2 || b[1]&0x80 != 0 || b[1]&0x7f > 125 || b[0]&0x70 != 0 {
			return out, fmt.Errorf("not a short unmasked server frame: % x", b[:min(len(b), 16)])
		}
		n := 2 + int(b[1])
		if len(b) < n {
			return out, fmt.Errorf("truncated server frame % x", b)
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out, nil
}

// FuzzEngineSocket runs arbitrary client bytes through the real engine over a socket and
// checks that the engine delivers exactly what the parse model (parseChunks) delivers for
// the same bytes, however the network and the handshake split them; that it hangs up once;
// and that the client reads a close frame for each close frame it sent and, after a protocol
// error, a last close frame with the error's code (1002, 1007 or 1009), then the end of the
// stream.
func FuzzEngineSocket(f *testing.F) {
	for _, s := range append(fuzzSeeds(), abuseSeeds()...) {
		f.Add(s, uint16(len(s)/3))
	}
	ae := newAbuseEngine(f)
	seq := 0
	f.Fuzz(func(t *testing.T, data []byte, early uint16) {
		seq++
		k := int(early) % (len(data) + 1)
		want, _ := parseChunks(data)
		a, got := ae.run(t, seq, data, k)
		if len(a.rec.bad) > 0 {
			t.Fatalf("broken invariants: %v", a.rec.bad)
		}
		if a.werr != nil {
			t.Fatal(a.werr)
		}
		if a.hangups != 1 {
			t.Fatalf("%d hang-ups", a.hangups)
		}
		if !slices.Equal(a.rec.events, want) {
			t.Fatalf("engine delivered (%d bytes early)\n%q\nthe model\n%q", k, a.rec.events, want)
		}
		if string(got) != string(a.written) {
			t.Fatalf("client read % x\nserver wrote % x", got, a.written)
		}
		frames, err := serverFrames(got)
		if err != nil {
			t.Fatal(err)
		}
		var codes []int
		for _, ev := range want {
			var code int
			switch {
			case strings.HasPrefix(ev, fmt.Sprintf("msg %d ", OpClose)):
				codes = append(codes, CloseNormal)
			case strings.HasPrefix(ev, "error "):
				fmt.Sscanf(ev, "error %d", &code)
				codes = append(codes, code)
			}
		}
		if len(frames) != len(codes) {
			t.Fatalf("client read %d frames, want close frames %v", len(frames), codes)
		}
		for i, fr := range frames {
			if fr[0] != 0x80|byte(OpClose) || len(fr) < 4 || int(binary.BigEndian.Uint16(fr[2:])) != codes[i] {
				t.Fatalf("frame %d: % x, want a close frame with %d", i, fr, codes[i])
			}
		}
	})
}

// TestNastySeedsOverSocket runs every nasty seed through the real engine with its bytes
// early, late and split, so the seeds are checked on every go test run without -fuzz, and
// checks that the engine's goroutines and descriptors do not grow with the connections.
func TestNastySeedsOverSocket(t *testing.T) {
	ae := newAbuseEngine(t)
	seq := 0
	seeds := append(fuzzSeeds(), abuseSeeds()...)
	baseG, baseFD := runtime.NumGoroutine(), countFDs()
	for i, s := range seeds {
		for _, early := range []int{0, len(s), len(s) / 2} {
			seq++
			want, _ := parseChunks(s)
			a, got := ae.run(t, seq, s, early)
			if !slices.Equal(a.rec.events, want) || a.hangups != 1 || len(a.rec.bad) > 0 || a.werr != nil {
				t.Errorf("seed %d, %d bytes early: delivered %q (hang-ups %d, bad %v, %v), model %q",
					i, early, a.rec.events, a.hangups, a.rec.bad, a.werr, want)
			}
			if string(got) != string(a.written) {
				t.Errorf("seed %d: client read % x, server wrote % x", i, got, a.written)
			}
		}
	}
	poll.Until(t, waitFor, fmt.Sprintf("the goroutines and fds to return to their baseline (%d and %d) after %d connections", baseG, baseFD, seq), func() (bool, string) {
		g, fd := runtime.NumGoroutine(), countFDs()
		return g <= baseG && fd <= baseFD, fmt.Sprintf("%d goroutines, %d fds", g, fd)
	})
}

func countFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}
