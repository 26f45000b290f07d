package ws

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAppendClientFrame(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 65535, 65536} {
		p := pattern(n)
		f := AppendClientFrame([]byte("x"), OpBinary, p)
		if f[0] != 'x' {
			t.Fatalf("n=%d: dst prefix overwritten", n)
		}
		h, ok, bad := parseHeader(f[1:], 1<<20)
		if !ok || bad != nil || !h.fin || h.op != OpBinary || h.length != n || len(f)-1 != h.size+n {
			t.Fatalf("n=%d: header %+v ok=%v bad=%v, frame %d bytes", n, h, ok, bad, len(f)-1)
		}
		got := slices.Clone(f[1+h.size:])
		unmask(got, h.mask)
		if !bytes.Equal(got, p) {
			t.Fatalf("n=%d: payload does not unmask to the original", n)
		}
	}
	masks := map[string]bool{}
	for range 4 {
		f := AppendClientFrame(nil, OpText, []byte("same"))
		masks[string(f[2:6])] = true
	}
	if len(masks) < 2 {
		t.Fatal("four frames used one mask: masks must be fresh")
	}
}

func TestParseFrameHeaderClientMode(t *testing.T) {
	server := AppendFrame(nil, OpText, []byte("hi"))
	if h, ok, bad := parseFrameHeader(server, 100, false); !ok || bad != nil || h.masked || h.size != 2 || h.length != 2 {
		t.Fatalf("unmasked server frame in client mode: %+v ok=%v bad=%v", h, ok, bad)
	}
	if _, _, bad := parseFrameHeader(clientFrame(true, OpText, []byte("hi"), testMask), 100, false); bad == nil || !strings.Contains(bad.reason, "must not be masked") {
		t.Fatalf("masked frame in client mode: bad=%v", bad)
	}
	if _, _, bad := parseHeader(server, 100); bad == nil || !strings.Contains(bad.reason, "must be masked") {
		t.Fatalf("unmasked frame in server mode: bad=%v", bad)
	}
}

// sink is a client-mode Handler that reports every call on a channel.
type sink struct{ ev chan event }

func (s *sink) OnMessage(c *Conn, op Opcode, p []byte) {
	s.ev <- event{kind: evMessage, op: op, payload: slices.Clone(p)}
}
func (s *sink) OnProtocolError(c *Conn, code int, reason string) {
	s.ev <- event{kind: evProtocolError, code: code, reason: reason}
	c.Shutdown()
}
func (s *sink) OnWritable(*Conn) {}
func (s *sink) OnHangup(c *Conn) { s.ev <- event{kind: evHangup}; c.Close() }

func (s *sink) next(t *testing.T, kind evKind) event {
	t.Helper()
	select {
	case e := <-s.ev:
		if e.kind != kind {
			t.Fatalf("got %v (%q %s), want %v", e.kind, e.payload, e.reason, kind)
		}
		return e
	case <-time.After(waitFor):
		t.Fatalf("waited %v for a %v event; none came", waitFor, kind)
	}
	return event{}
}

// clientEngine attaches the client end of a TCP pair to a client-mode engine and returns the
// server end, the sink and the attached connection.
func clientEngine(t *testing.T, pre []byte) (net.Conn, *sink, *Conn) {
	t.Helper()
	s := &sink{ev: make(chan event, 16)}
	e, err := NewEngine(Config{Client: true, MaxMessageBytes: 1 << 10}, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	server, client := tcpPair(t)
	t.Cleanup(func() { server.Close() })
	c, err := e.Attach(client, pre, func(*Conn) {})
	if err != nil {
		t.Fatal(err)
	}
	return server, s, c
}

func TestClientEngineReadsServerFrames(t *testing.T) {
	server, s, c := clientEngine(t, AppendFrame(nil, OpText, []byte("early")))
	if e := s.next(t, evMessage); string(e.payload) != "early" {
		t.Fatalf("pre-buffered frame delivered as %q", e.payload)
	}
	var b []byte
	b = append(b, 0x01, 3, 'h', 'e', 'l') // text, not final
	b = AppendFrame(b, OpPing, []byte("p"))
	b = append(b, 0x80, 2, 'l', 'o') // final continuation
	b = AppendFrame(b, OpBinary, []byte{1, 2})
	if _, err := server.Write(b); err != nil {
		t.Fatal(err)
	}
	if e := s.next(t, evMessage); e.op != OpPing || string(e.payload) != "p" {
		t.Fatalf("got op %d %q, want the ping", e.op, e.payload)
	}
	if e := s.next(t, evMessage); e.op != OpText || string(e.payload) != "hello" {
		t.Fatalf("got op %d %q, want the joined text", e.op, e.payload)
	}
	if e := s.next(t, evMessage); e.op != OpBinary || !bytes.Equal(e.payload, []byte{1, 2}) {
		t.Fatalf("got op %d %q, want the binary message", e.op, e.payload)
	}
	// What the client writes arrives masked, as a server expects it.
	if _, _, err := c.Writev([][]byte{AppendClientFrame(nil, OpText, []byte("up"))}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	server.SetReadDeadline(time.Now().Add(waitFor))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	h, ok, bad := parseHeader(got, 100)
	p := got[h.size:]
	unmask(p, h.mask)
	if !ok || bad != nil || string(p) != "up" {
		t.Fatalf("server read %x: header %+v %v %v", got, h, ok, bad)
	}
	server.Close()
	s.next(t, evHangup)
}

func TestClientEngineRejectsMaskedFrames(t *testing.T) {
	server, s, _ := clientEngine(t, nil)
	if _, err := server.Write(clientFrame(true, OpText, []byte("masked"), testMask)); err != nil {
		t.Fatal(err)
	}
	if e := s.next(t, evProtocolError); e.code != CloseProtocolError || !strings.Contains(e.reason, "must not be masked") {
		t.Fatalf("protocol error %d %q", e.code, e.reason)
	}
	s.next(t, evHangup)
}

// handshakeServer answers WebSocket handshakes with accept (nil: the right one) and then
// sends hello.
func handshakeServer(t *testing.T, accept func(string) string, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != 0 {
			http.Error(w, "nope", status)
			return
		}
		acc, err := CheckHandshake(r)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if accept != nil {
			acc = accept(acc)
		}
		nc, _, err := Hijack(w, acc, TextFrame([]byte("hello")), waitFor)
		if err != nil {
			return
		}
		t.Cleanup(func() { nc.Close() })
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func dialHandshake(t *testing.T, addr string) (*bufio.Reader, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(waitFor))
	br := bufio.NewReader(nc)
	return br, ClientHandshake(nc, br, addr, "/app/key?protocol=7")
}

func TestClientHandshake(t *testing.T) {
	br, err := dialHandshake(t, handshakeServer(t, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	m := &MessageReader{R: br, Max: 100}
	if op, p, err := m.Next(); err != nil || op != OpText || string(p) != "hello" {
		t.Fatalf("first message: op %d %q %v", op, p, err)
	}
	_, err = dialHandshake(t, handshakeServer(t, func(string) string { return "wrong" }, 0))
	if err == nil || !strings.Contains(err.Error(), "Sec-WebSocket-Accept") {
		t.Fatalf("wrong accept: err = %v", err)
	}
	_, err = dialHandshake(t, handshakeServer(t, nil, http.StatusServiceUnavailable))
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("refused handshake: err = %v", err)
	}
}

func TestMessageReader(t *testing.T) {
	var b []byte
	b = append(b, 0x01, 3, 'h', 'e', 'l')
	b = AppendFrame(b, OpPing, []byte("p"))
	b = append(b, 0x80, 2, 'l', 'o')
	b = AppendFrame(b, OpText, pattern(300))
	b = AppendFrame(b, OpClose, []byte{3, 232})
	m := &MessageReader{R: bufio.NewReaderSize(bytes.NewReader(b), 16), Max: 1000}
	for _, want := range []struct {
		op Opcode
		p  []byte
	}{{OpPing, []byte("p")}, {OpText, []byte("hello")}, {OpText, pattern(300)}, {OpClose, []byte{3, 232}}} {
		op, p, err := m.Next()
		if err != nil || op != want.op || !bytes.Equal(p, want.p) {
			t.Fatalf("got op %d %q %v, want op %d %q", op, p, err, want.op, want.p)
		}
	}
	if _, _, err := m.Next(); err != io.EOF {
		t.Fatalf("at the end: %v, want EOF", err)
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"masked":   {clientFrame(true, OpText, []byte("x"), testMask), "masked"},
		"too big":  {AppendFrame(nil, OpText, pattern(1001)), "too big"},
		"joined":   {append([]byte{0x01, 1, 'a'}, AppendFrame(nil, OpText, pattern(600))...), "inside a fragmented"},
		"orphan":   {[]byte{0x80, 1, 'a'}, "continuation without"},
		"reserved": {[]byte{0xC1, 1, 'a'}, "reserved"},
	} {
		m := &MessageReader{R: bufio.NewReader(bytes.NewReader(tc.b)), Max: 1000}
		if _, _, err := m.Next(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}
