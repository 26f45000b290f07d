package ws

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
)

func expectFrame(t *testing.T, cl *wstest.Client, op Opcode, payload []byte) {
	t.Helper()
	f, err := cl.ReadFrame(waitFor)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	if Opcode(f.Op) != op || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("got op %d payload %q, want op %d payload %q", f.Op, head(f.Payload), op, head(payload))
	}
}

// expectCloseThenEOF reads a close frame with code, then the end of the stream.
func expectCloseThenEOF(t *testing.T, cl *wstest.Client, code int) {
	t.Helper()
	f, err := cl.ReadFrame(waitFor)
	if err != nil {
		t.Fatalf("read close frame: %v", err)
	}
	if f.Op != byte(OpClose) || f.CloseCode() != code {
		t.Fatalf("got op %d code %d (%q), want a close frame with %d", f.Op, f.CloseCode(), f.Payload, code)
	}
	expectEOF(t, cl)
}

func expectEOF(t *testing.T, cl *wstest.Client) {
	t.Helper()
	if f, err := cl.ReadFrame(waitFor); !errors.Is(err, io.EOF) {
		t.Fatalf("after shutdown: frame op %d, err %v; want EOF", f.Op, err)
	}
}

func TestEchoText(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	if err := cl.WriteText("hello, herald"); err != nil {
		t.Fatal(err)
	}
	e := hs.next(o, evMessage)
	if e.op != OpText || string(e.payload) != "hello, herald" {
		t.Fatalf("delivered op %d %q", e.op, e.payload)
	}
	expectFrame(t, cl, OpText, []byte("hello, herald"))
	// An empty message and a multi-byte one.
	cl.WriteText("")
	cl.WriteText("héllo → 世界")
	expectFrame(t, cl, OpText, nil)
	expectFrame(t, cl, OpText, []byte("héllo → 世界"))
}

func TestEchoBinary(t *testing.T) {
	hs := newHarness(t, Config{MaxMessageBytes: 100000})
	cl, o := hs.dial()
	p := []byte{0, 1, 2, 0xff, 0xfe, 0x80}
	if err := cl.WriteFrame(true, byte(OpBinary), p); err != nil {
		t.Fatal(err)
	}
	if e := hs.next(o, evMessage); e.op != OpBinary || !bytes.Equal(e.payload, p) {
		t.Fatalf("delivered op %d % x", e.op, e.payload)
	}
	expectFrame(t, cl, OpBinary, p)
	// 16-bit and 64-bit lengths.
	for _, n := range []int{126, 65535, 65536, 100000} {
		p := pattern(n)
		cl.WriteFrame(true, byte(OpBinary), p)
		expectFrame(t, cl, OpBinary, p)
	}
}

func TestMessageSplitByteByByte(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	msg := strings.Repeat("split across many reads ", 20) // 480 bytes: a 16-bit length
	frames := append(clientFrame(true, OpText, []byte(msg), testMask), clientFrame(true, OpText, []byte("second"), testMask)...)
	for i := range frames {
		if _, err := cl.Conn.Write(frames[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if e := hs.next(o, evMessage); string(e.payload) != msg {
		t.Fatalf("delivered %q", head(e.payload))
	}
	if e := hs.next(o, evMessage); string(e.payload) != "second" {
		t.Fatalf("delivered %q", e.payload)
	}
	expectFrame(t, cl, OpText, []byte(msg))
	expectFrame(t, cl, OpText, []byte("second"))
}

func TestFragmentedMessageJoined(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	cl.WriteFrame(false, byte(OpText), []byte("hel"))
	cl.WriteFrame(false, byte(OpContinuation), []byte("lo "))
	cl.WriteFrame(true, byte(OpPing), []byte("mid")) // control frames may come between fragments
	cl.WriteFrame(false, byte(OpContinuation), nil)
	cl.WriteFrame(true, byte(OpContinuation), []byte("world"))
	if e := hs.next(o, evMessage); e.op != OpPing || string(e.payload) != "mid" {
		t.Fatalf("first delivery: op %d %q, want the ping", e.op, e.payload)
	}
	if e := hs.next(o, evMessage); e.op != OpText || string(e.payload) != "hello world" {
		t.Fatalf("second delivery: op %d %q", e.op, e.payload)
	}
	expectFrame(t, cl, OpPong, []byte("mid"))
	expectFrame(t, cl, OpText, []byte("hello world"))

	// A character split between fragments is still valid UTF-8 once joined.
	cl.WriteFrame(false, byte(OpText), []byte{0xe2, 0x82})
	cl.WriteFrame(true, byte(OpContinuation), []byte{0xac})
	expectFrame(t, cl, OpText, []byte("€"))
	// Binary fragments.
	cl.WriteFrame(false, byte(OpBinary), []byte{1})
	cl.WriteFrame(true, byte(OpContinuation), []byte{2, 3})
	expectFrame(t, cl, OpBinary, []byte{1, 2, 3})
}

func TestPingDelivered(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	for _, p := range [][]byte{nil, []byte("ping!"), pattern(125)} {
		cl.WriteFrame(true, byte(OpPing), p)
		if e := hs.next(o, evMessage); e.op != OpPing || !bytes.Equal(e.payload, p) {
			t.Fatalf("delivered op %d %q", e.op, e.payload)
		}
		expectFrame(t, cl, OpPong, p)
	}
	cl.WriteFrame(true, byte(OpPong), []byte("unsolicited"))
	if e := hs.next(o, evMessage); e.op != OpPong || string(e.payload) != "unsolicited" {
		t.Fatalf("delivered op %d %q", e.op, e.payload)
	}
}

func TestClientCloseFrame(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	cl.WriteFrame(true, byte(OpClose), []byte{0x03, 0xe8, 'b', 'y', 'e'})
	if e := hs.next(o, evMessage); e.op != OpClose || string(e.payload) != "\x03\xe8bye" {
		t.Fatalf("delivered op %d %q", e.op, e.payload)
	}
	expectCloseThenEOF(t, cl, CloseNormal)
	hs.next(o, evHangup)
}

func TestProtocolErrors(t *testing.T) {
	const max = 1024
	for _, tc := range []struct {
		name string
		send func(cl *wstest.Client) error
		code int
	}{
		{"oversized message", func(cl *wstest.Client) error {
			return cl.WriteFrame(true, byte(OpText), bytes.Repeat([]byte("a"), max+1))
		}, CloseTooBig},
		{"oversized 64-bit length", func(cl *wstest.Client) error {
			_, err := cl.Conn.Write([]byte{0x82, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4})
			return err
		}, CloseTooBig},
		{"oversized when joined", func(cl *wstest.Client) error {
			cl.WriteFrame(false, byte(OpText), bytes.Repeat([]byte("a"), 600))
			return cl.WriteFrame(true, byte(OpContinuation), bytes.Repeat([]byte("b"), 600))
		}, CloseTooBig},
		{"invalid UTF-8", func(cl *wstest.Client) error {
			return cl.WriteFrame(true, byte(OpText), []byte("ok\xff\xfe"))
		}, CloseInvalidData},
		{"invalid UTF-8 joined", func(cl *wstest.Client) error {
			cl.WriteFrame(false, byte(OpText), []byte{0xe2, 0x82})
			return cl.WriteFrame(true, byte(OpContinuation), []byte{'x'})
		}, CloseInvalidData},
		{"unmasked frame", func(cl *wstest.Client) error {
			_, err := cl.Conn.Write([]byte{0x81, 0x02, 'h', 'i'})
			return err
		}, CloseProtocolError},
		{"reserved bit", func(cl *wstest.Client) error {
			_, err := cl.Conn.Write(append([]byte{0xC1, 0x80}, testMask[:]...))
			return err
		}, CloseProtocolError},
		{"unknown opcode", func(cl *wstest.Client) error { return cl.WriteFrame(true, 0x3, nil) }, CloseProtocolError},
		{"reserved control opcode", func(cl *wstest.Client) error { return cl.WriteFrame(true, 0xB, nil) }, CloseProtocolError},
		{"continuation without a message", func(cl *wstest.Client) error {
			return cl.WriteFrame(true, byte(OpContinuation), []byte("x"))
		}, CloseProtocolError},
		{"new message inside a fragmented one", func(cl *wstest.Client) error {
			cl.WriteFrame(false, byte(OpText), []byte("a"))
			return cl.WriteFrame(true, byte(OpText), []byte("b"))
		}, CloseProtocolError},
		{"fragmented ping", func(cl *wstest.Client) error { return cl.WriteFrame(false, byte(OpPing), nil) }, CloseProtocolError},
		{"ping over 125 bytes", func(cl *wstest.Client) error {
			return cl.WriteFrame(true, byte(OpPing), pattern(126))
		}, CloseProtocolError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, Config{MaxMessageBytes: max})
			cl, o := hs.dial()
			cl.WriteText("before")
			expectFrame(t, cl, OpText, []byte("before"))
			if err := tc.send(cl); err != nil {
				t.Fatal(err)
			}
			e := hs.next(o, evProtocolError)
			if e.code != tc.code {
				t.Fatalf("protocol error %d (%s), want %d", e.code, e.reason, tc.code)
			}
			expectCloseThenEOF(t, cl, tc.code)
			hs.next(o, evHangup)
			// Nothing but the first message was delivered.
			for len(hs.h.events) > 0 {
				if e := <-hs.h.events; e.kind == evMessage && string(e.payload) != "before" {
					t.Fatalf("delivered %q around a protocol error", e.payload)
				}
			}
		})
	}
}

func TestClientCloseHangsUpOnce(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	cl.WriteText("x")
	expectFrame(t, cl, OpText, []byte("x"))
	cl.Close()
	hs.next(o, evHangup)
	select {
	case <-o.done:
	case <-time.After(waitFor):
		t.Fatal("owner did not close the connection")
	}
	// After Close the engine is stopped: no event can follow, so the count is final.
	hs.e.Close()
	if n := o.hangups.Load(); n != 1 {
		t.Fatalf("%d hang-ups, want 1", n)
	}
	if _, _, err := o.c.Writev([][]byte{[]byte("late")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Writev after Close: %v, want ErrClosed", err)
	}
	o.c.Shutdown() // a no-op after Close
}

func TestShutdownByOwner(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	o.write(AppendFrame(nil, OpText, []byte("last words")))
	o.cmds <- ownerCmd{kind: cmdShutdown}
	hs.next(o, evHangup)
	// What was written before Shutdown still arrives, then the stream ends.
	expectFrame(t, cl, OpText, []byte("last words"))
	expectEOF(t, cl)
}

func TestResetByPeerHangsUp(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	cl.Conn.(*net.TCPConn).SetLinger(0) // close sends RST
	cl.Close()
	hs.next(o, evHangup)
}

// TestPreBufferedBytes sends the handshake request and the first frames in one write, so that
// the frames reach the server in the HTTP reader's buffer, not on the socket.
func TestPreBufferedBytes(t *testing.T) {
	hs := newHarness(t, Config{})
	nc, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	second := clientFrame(true, OpText, []byte("second, half early"), testMask)
	req := "GET / HTTP/1.1\r\nHost: " + hs.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	first := append([]byte(req), clientFrame(true, OpText, []byte("first, with the request"), testMask)...)
	first = append(first, clientFrame(true, OpBinary, []byte{7}, testMask)...)
	first = append(first, second[:9]...) // a frame cut inside its mask
	if _, err := nc.Write(first); err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(waitFor))
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("handshake: %d %v", resp.StatusCode, resp.Header)
	}
	o := hs.owner()
	if n := <-hs.preLen; n == 0 {
		t.Fatal("the frames were not pre-buffered: this test did not test what it should")
	}
	if e := hs.next(o, evMessage); string(e.payload) != "first, with the request" {
		t.Fatalf("delivered %q", e.payload)
	}
	if e := hs.next(o, evMessage); e.op != OpBinary || !bytes.Equal(e.payload, []byte{7}) {
		t.Fatalf("delivered op %d %q", e.op, e.payload)
	}
	checkFrame(t, br, OpText, "first, with the request")
	checkFrame(t, br, OpBinary, "\x07")
	// The rest of the cut frame comes later, on the socket.
	if _, err := nc.Write(second[9:]); err != nil {
		t.Fatal(err)
	}
	if e := hs.next(o, evMessage); string(e.payload) != "second, half early" {
		t.Fatalf("delivered %q", e.payload)
	}
	checkFrame(t, br, OpText, "second, half early")
	nc.Close()
	hs.next(o, evHangup)
}

// checkFrame reads one short server frame from br.
func checkFrame(t *testing.T, br *bufio.Reader, op Opcode, payload string) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	if h[0] != 0x80|byte(op) || h[1]&0x80 != 0 || string(p) != payload {
		t.Fatalf("frame % x %q, want op %d %q", h, p, op, payload)
	}
}

func TestManyConnectionsAcrossPollers(t *testing.T) {
	hs := newHarness(t, Config{Pollers: 3})
	const n = 30
	clients := make([]*wstest.Client, n)
	for i := range clients {
		clients[i], _ = hs.dial()
	}
	for i, cl := range clients {
		cl.WriteText(fmt.Sprintf("message %d", i))
	}
	for i, cl := range clients {
		expectFrame(t, cl, OpText, []byte(fmt.Sprintf("message %d", i)))
	}
}

// TestWriteBackpressure fills a socket whose client does not read until Writev reports
// blocked, then lets the client read: OnWritable follows and the rest goes out, byte for byte.
func TestWriteBackpressure(t *testing.T) {
	hs := newHarness(t, Config{})
	cl, o := hs.dial()
	payload := pattern(64 << 10)
	frame := AppendFrame(nil, OpBinary, payload)
	total, blocked := 0, false
	for total < 512<<20 {
		r := o.write(frame)
		total += len(frame)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.blocked {
			blocked = true
			break
		}
	}
	if !blocked {
		t.Fatalf("wrote %d bytes to a client that does not read without blocking", total)
	}
	if w := o.written.Load(); w >= int64(total) {
		t.Fatalf("blocked, yet all %d bytes were written", w)
	}
	// More frames while blocked: they wait in the owner's queue.
	for i := 0; i < 8; i++ {
		o.write(frame)
		total += len(frame)
	}

	got := make(chan error, 1)
	go func() {
		for read := 0; read < total; {
			f, err := cl.ReadFrame(waitFor)
			if err != nil {
				got <- fmt.Errorf("after %d of %d bytes: %w", read, total, err)
				return
			}
			if Opcode(f.Op) != OpBinary || !bytes.Equal(f.Payload, payload) {
				got <- fmt.Errorf("after %d bytes: a corrupt frame (op %d, %d bytes)", read, f.Op, len(f.Payload))
				return
			}
			read += len(frame)
		}
		got <- nil
	}()

	hs.next(o, evWritable)
	deadline := time.After(4 * waitFor)
	for done := false; !done; {
		select {
		case r := <-o.flushed:
			if r.err != nil {
				t.Fatal(r.err)
			}
			done = r.queued == 0
		case <-deadline:
			t.Fatalf("queue never drained: %d of %d bytes written", o.written.Load(), total)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if w := o.written.Load(); w != int64(total) {
		t.Fatalf("written %d bytes, want %d", w, total)
	}
}

func TestCheckHandshake(t *testing.T) {
	good := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/app/key", nil)
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Upgrade", "WebSocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		return r
	}
	accept, err := CheckHandshake(good())
	if err != nil || accept != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" { // RFC 6455 §1.3
		t.Fatalf("CheckHandshake = %q, %v", accept, err)
	}
	for _, tc := range []struct {
		name string
		edit func(r *http.Request)
	}{
		{"POST", func(r *http.Request) { r.Method = http.MethodPost }},
		{"no Connection", func(r *http.Request) { r.Header.Del("Connection") }},
		{"Connection without upgrade", func(r *http.Request) { r.Header.Set("Connection", "keep-alive") }},
		{"no Upgrade", func(r *http.Request) { r.Header.Del("Upgrade") }},
		{"Upgrade h2c", func(r *http.Request) { r.Header.Set("Upgrade", "h2c") }},
		{"no version", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Version") }},
		{"version 8", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "8") }},
		{"no key", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Key") }},
		{"key not base64", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "not base64!!") }},
		{"key of 15 bytes", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAA") }},
		{"key of 17 bytes", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAAA=") }},
	} {
		r := good()
		tc.edit(r)
		if a, err := CheckHandshake(r); !errors.Is(err, ErrNotWebSocket) || a != "" {
			t.Errorf("%s: %q, %v; want ErrNotWebSocket", tc.name, a, err)
		}
	}

	// Over HTTP: a plain GET is answered 400 and nothing is attached.
	hs := newHarness(t, Config{})
	resp, err := http.Get(hs.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain GET: %d, want 400", resp.StatusCode)
	}
}

func TestAttachAfterEngineClose(t *testing.T) {
	e, err := NewEngine(Config{}, &echo{events: make(chan event, 1)})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	e.Close() // idempotent
	a, b := tcpPair(t)
	defer b.Close()
	called := false
	if c, err := e.Attach(a, nil, func(*Conn) { called = true }); err == nil || c != nil || called {
		t.Fatalf("Attach on a closed engine: %v, %v, bind called %v", c, err, called)
	}
	// The connection was closed: the peer reads EOF.
	b.SetReadDeadline(time.Now().Add(waitFor))
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("peer read: %v, want EOF", err)
	}
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}
