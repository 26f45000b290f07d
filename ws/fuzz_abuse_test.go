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
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// This file feeds hostile bytes to the engine: huge declared lengths, truncated frames,
// garbage, invalid UTF-8. FuzzParse (fuzz_test.go) checks the parser on its own; here the
// targets check what it holds in memory meanwhile, and run the same bytes through the real
// engine over a socket, handshake and pre-buffered bytes included.

// longFrame is a masked frame header declaring n payload bytes in the 64-bit form, followed
// by payload (which may be shorter than n: a truncated frame).
func longFrame(op Opcode, fin bool, n uint64, payload []byte) []byte {
	first := byte(op)
	if fin {
		first |= 0x80
	}
	b := append([]byte{first, 0x80 | 127}, binary.BigEndian.AppendUint64(nil, n)...)
	b = append(b, testMask[:]...)
	for i, x := range payload {
		b = append(b, x^testMask[i&3])
	}
	return b
}

// abuseSeeds are the nasty inputs FuzzParse's seeds lack. Every one runs in plain go test as
// a seed of the fuzz targets below.
func abuseSeeds() [][]byte {
	m := testMask
	cat := func(fs ...[]byte) []byte { return slices.Concat(fs...) }
	text := func(s string) []byte { return clientFrame(true, OpText, []byte(s), m) }
	return [][]byte{
		// Huge declared lengths: the largest legal 64-bit length, every bit set, the top bit
		// alone (which RFC 6455 forbids), 4 GiB, and just over the limit in both long forms.
		longFrame(OpBinary, true, math.MaxInt64, nil),
		longFrame(OpText, true, math.MaxUint64, []byte("x")),
		longFrame(OpText, true, 1<<63, nil),
		longFrame(OpText, true, 1<<32, pattern(64)),
		longFrame(OpText, true, fuzzMax+1, nil),
		{0x81, 0x80 | 126, 0x01, 0x2d, 1, 2, 3, 4}, // 16-bit form, 301 bytes
		{0x81, 0x80 | 126, 0xff, 0xff, 1, 2, 3, 4},
		// Legal but unusual lengths: the long forms used for short payloads.
		longFrame(OpText, true, 2, []byte("hi")),
		cat([]byte{0x81, 0x80 | 126, 0, 2}, m[:], []byte{'h' ^ m[0], 'i' ^ m[1]}),
		longFrame(OpPing, true, 126, nil), // control frame over 125 bytes in the 64-bit form
		// Truncated frames: one byte, a header cut in its length, in its mask, in its payload.
		{0x81},
		{0x81, 0xFF, 0, 0, 0},
		{0x81, 0x85, 1, 2},
		text("truncated")[:8],
		cat(text("whole"), text("and a cut one")[:7]),
		// Fragmented messages: a huge declared continuation, a fragmented message that grows
		// past the limit one byte at a time, a control frame over 125 bytes in the middle.
		cat(clientFrame(false, OpText, []byte("a"), m), longFrame(OpContinuation, true, math.MaxInt64, nil)),
		cat(clientFrame(false, OpBinary, pattern(150), m), clientFrame(false, OpContinuation, pattern(150), m),
			clientFrame(true, OpContinuation, []byte{1}, m)),
		cat(clientFrame(false, OpText, []byte("a"), m), clientFrame(true, OpPing, pattern(126), m)),
		cat(clientFrame(false, OpText, nil, m), clientFrame(false, OpContinuation, nil, m),
			clientFrame(true, OpContinuation, nil, m)),
		// Invalid UTF-8: overlong encodings, surrogates, code points past U+10FFFF, a rune cut
		// by the end of the message, a rune split over fragments (valid).
		text("\xc0\xaf"),
		text("\xed\xa0\x80"),
		text("\xf4\x90\x80\x80"),
		text("ok\xe2\x82"),
		cat(clientFrame(false, OpText, []byte("\xf0\x9f"), m), clientFrame(true, OpContinuation, []byte("\x98\x80"), m)),
		// Close frames: one byte of payload, codes that must not be sent, a reason that is
		// not UTF-8, and data after the close frame.
		clientFrame(true, OpClose, []byte{0x03}, m),
		clientFrame(true, OpClose, []byte{0x03, 0xed}, m),
		clientFrame(true, OpClose, []byte{0x00, 0x00}, m),
		clientFrame(true, OpClose, []byte{0x03, 0xe8, 0xff, 0xfe}, m),
		cat(clientFrame(true, OpClose, []byte{0x03, 0xe8}, m), text("after close")),
		// Garbage: reserved bits, every reserved opcode, unmasked frames, random bytes, HTTP.
		{0xF1, 0x80, 1, 2, 3, 4},
		cat(clientFrame(true, 3, nil, m), clientFrame(true, 7, nil, m)),
		clientFrame(true, 0xF, nil, m),
		{0x89, 0x00},
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		pattern(1000),
		// Many tiny frames and pings in one read.
		slices.Repeat(clientFrame(true, OpPing, nil, m), 200),
		slices.Repeat(text(""), 200),
	}
}

// parseBounds is how much a connection may hold between reads: at most one incomplete frame
// (header and payload of a message within the limit) and the fragments of one message. The
// buffers' capacities may exceed their lengths by what one read brought in and append's
// growth, so they are checked against twice the sum.
func parseBounds(max, maxRead int) (rbufLen, rbufCap, msgCap int) {
	const frameHeader = 14
	// The partial-frame buffer is sized to its frame once the header is in, and grows only to
	// what one read adds; the message buffer never grows past the limit.
	return frameHeader + max - 1, frameHeader + max + maxRead, max
}

// FuzzParseBounded feeds arbitrary bytes in reads of a fuzzed size and checks, after every
// read, what the connection holds: never more than one frame within the limit, however long
// a length the bytes declare. (FuzzParse checks what is delivered.)
func FuzzParseBounded(f *testing.F) {
	for _, s := range append(fuzzSeeds(), abuseSeeds()...) {
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, read uint8) {
		size := int(read) + 1
		rec := &recorder{}
		p := &poller{e: &Engine{cfg: Config{MaxMessageBytes: fuzzMax}, h: rec}}
		c := &Conn{p: p}
		rbufLen, rbufCap, msgCap := parseBounds(fuzzMax, size)
		for len(data) > 0 && !c.broken {
			n := min(size, len(data))
			p.feed(c, slices.Clone(data[:n]))
			data = data[n:]
			if len(c.rbuf) > rbufLen || cap(c.rbuf) > rbufCap || len(c.msg) > fuzzMax || cap(c.msg) > msgCap {
				t.Fatalf("holding rbuf %d (cap %d, bound %d/%d) and msg %d (cap %d, bound %d/%d)",
					len(c.rbuf), cap(c.rbuf), rbufLen, rbufCap, len(c.msg), cap(c.msg), fuzzMax, msgCap)
			}
		}
		if len(rec.bad) > 0 {
			t.Fatal(rec.bad)
		}
		if c.broken && (c.rbuf != nil || c.msg != nil) {
			t.Fatalf("a broken connection still holds rbuf %d and msg %d bytes", len(c.rbuf), len(c.msg))
		}
	})
}

// nopHandler ignores everything except protocol errors, whose code it keeps.
type nopHandler struct{ code atomic.Int32 }

func (*nopHandler) OnMessage(*Conn, Opcode, []byte) {}
func (h *nopHandler) OnProtocolError(_ *Conn, code int, _ string) {
	h.code.Store(int32(code))
}
func (*nopHandler) OnWritable(*Conn) {}
func (*nopHandler) OnHangup(*Conn)   {}

// TestHugeDeclaredLengthAllocatesNoPayload checks that a header declaring more than the limit
// is refused with 1009 before anything is allocated for its payload, whatever it declares.
func TestHugeDeclaredLengthAllocatesNoPayload(t *testing.T) {
	const max = 64 << 10
	for _, n := range []uint64{max + 1, 1 << 20, 1 << 32, 1 << 62, math.MaxInt64, 1 << 63, math.MaxUint64} {
		for _, op := range []Opcode{OpText, OpBinary, OpContinuation} {
			frame := longFrame(op, true, n, pattern(100))
			if op == OpContinuation {
				frame = append(clientFrame(false, OpText, []byte("a"), testMask), frame...)
			}
			h := &nopHandler{}
			p := &poller{e: &Engine{cfg: Config{MaxMessageBytes: max}, h: h}}
			in := make([]byte, len(frame))
			var c *Conn
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(100, func() {
				c = &Conn{p: p}
				copy(in, frame)
				p.feed(c, in)
			})
			runtime.ReadMemStats(&after)
			perRun := float64(after.TotalAlloc-before.TotalAlloc) / 101
			if h.code.Load() != CloseTooBig || !c.broken || c.rbuf != nil || c.msg != nil {
				t.Errorf("declared %d (op %d): close %d, broken %v, holding rbuf %d msg %d; want 1009 and nothing held",
					n, op, h.code.Load(), c.broken, len(c.rbuf), len(c.msg))
			}
			// The Conn itself, the error and, for a continuation, the first fragment.
			if allocs > 4 || perRun > 1024 {
				t.Errorf("declared %d (op %d): %.0f allocations, %.0f bytes per frame; want a few small ones", n, op, allocs, perRun)
			}
		}
	}
}

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
	deadline := time.Now().Add(waitFor)
	for _, p := range all {
		for unread(t, p.c.fd) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("fd %d: %d bytes still unread by the engine", p.c.fd, unread(t, p.c.fd))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	e.Close()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	_, rbufCap, msgCap := parseBounds(limit, e.cfg.ReadBufferBytes)
	worst := 0
	for _, p := range held {
		c := p.c
		if c.broken || len(c.msg) != limit-1 || len(c.rbuf) != 14+limit-1 {
			t.Fatalf("fd %d: broken %v, holding msg %d and rbuf %d bytes; the test did not build what it meant to",
				c.fd, c.broken, len(c.msg), len(c.rbuf))
		}
		if cap(c.rbuf) > rbufCap || cap(c.msg) > msgCap {
			t.Errorf("fd %d: rbuf cap %d (bound %d), msg cap %d (bound %d)", c.fd, cap(c.rbuf), rbufCap, cap(c.msg), msgCap)
		}
		worst = max(worst, cap(c.rbuf)+cap(c.msg))
	}
	for _, p := range huge {
		if c := p.c; !c.broken || c.rbuf != nil || c.msg != nil {
			t.Errorf("fd %d declared 2^63-1 bytes: broken %v, holding rbuf %d msg %d", c.fd, c.broken, len(c.rbuf), len(c.msg))
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
	deadline := time.Now().Add(waitFor)
	for {
		g, fd := runtime.NumGoroutine(), countFDs()
		if g <= baseG && fd <= baseFD {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d connections: %d goroutines (baseline %d), %d fds (baseline %d)", seq, g, baseG, fd, baseFD)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}
