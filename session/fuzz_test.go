package session

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// This file feeds hostile client messages to the server's message path (OnMessage and onText):
// garbage, broken JSON, deeply nested JSON, subscriptions, sign-ins and client events with
// wrong or absurd fields. Whatever arrives, the server must not panic, must answer with frames a
// client can parse, must either keep the connection healthy or close it, must leave other
// connections alone, and must forget everything the connection joined when it goes.

// recTransport records what a worker writes to a fake connection and whether it shut the
// connection down and closed it. Only the connection's worker touches it; tests read it after
// h.fence().
type recTransport struct {
	out    []byte
	shut   bool
	closed bool
}

func (r *recTransport) Writev(bufs [][]byte) (int, bool, error) {
	n := 0
	for _, b := range bufs {
		r.out = append(r.out, b...)
		n += len(b)
	}
	return n, false, nil
}
func (r *recTransport) Shutdown()    { r.shut = true }
func (r *recTransport) Close() error { r.closed = true; return nil }

// serverFrame is one frame the server wrote.
type serverFrame struct {
	op      ws.Opcode
	payload []byte
}

// pusherMsg is a Pusher message as a client decodes it.
type pusherMsg struct {
	Event   string          `json:"event"`
	Channel string          `json:"channel"`
	Data    json.RawMessage `json:"data"`
}

// splitFrames parses what the server wrote to one connection: unmasked final frames, text
// frames holding a valid UTF-8 JSON object with an event name, close frames with a status
// code and a UTF-8 reason, nothing after a close frame.
func splitFrames(b []byte) ([]serverFrame, error) {
	var out []serverFrame
	for len(b) > 0 {
		if len(out) > 0 && out[len(out)-1].op == ws.OpClose {
			return out, fmt.Errorf("%d bytes after the close frame", len(b))
		}
		if len(b) < 2 || b[0]&0xF0 != 0x80 || b[1]&0x80 != 0 {
			return out, fmt.Errorf("bad frame header % x", b[:min(len(b), 2)])
		}
		n, h := int(b[1]), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return out, fmt.Errorf("truncated header % x", b)
			}
			n, h = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			if len(b) < 10 {
				return out, fmt.Errorf("truncated header % x", b)
			}
			n, h = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		if len(b) < h+n {
			return out, fmt.Errorf("truncated frame: %d of %d bytes", len(b)-h, n)
		}
		f := serverFrame{op: ws.Opcode(b[0] & 0x0F), payload: b[h : h+n]}
		b = b[h+n:]
		switch f.op {
		case ws.OpText:
			if !utf8.Valid(f.payload) {
				return out, fmt.Errorf("text frame is not UTF-8: %q", f.payload)
			}
			var m pusherMsg
			if err := json.Unmarshal(f.payload, &m); err != nil || m.Event == "" {
				return out, fmt.Errorf("text frame is not a Pusher message (%v): %q", err, f.payload)
			}
		case ws.OpClose:
			if len(f.payload) < 2 || !utf8.Valid(f.payload[2:]) {
				return out, fmt.Errorf("close frame without a code or with a reason that is not UTF-8: %q", f.payload)
			}
		case ws.OpPong:
		default:
			return out, fmt.Errorf("unexpected opcode %d", f.op)
		}
		out = append(out, f)
	}
	return out, nil
}

func decodeFrame(f serverFrame) pusherMsg {
	var m pusherMsg
	_ = json.Unmarshal(f.payload, &m)
	return m
}

// validCloseCode reports whether the server may send code in a close frame (RFC 6455 §7.4).
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014, code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// fuzzServer is one server shared by every input of a fuzz process, with a bystander connection
// that has joined every channel the fuzzed connection can join with a valid signature.
type fuzzServer struct {
	h      *Server
	by     *conn
	byT    *recTransport
	byWS   *ws.Conn
	seq    int
	base   Stats
	shared []string // the bystander's channels
}

const (
	fuzzPrivate  = "private-fuzz"
	fuzzPresence = "presence-fuzz"
	fuzzCache    = "private-cache-fuzz"
	fuzzPublic   = "fuzz"
)

// Modes: what the fuzzed connection does with valid signatures before its fuzzed messages.
const (
	modePrivate  = 1 << iota // joins private-fuzz
	modePresence             // joins presence-fuzz as user "fuzzer"
	modeSignin               // signs in as user "fuzzer"
	modeCache                // joins private-cache-fuzz
)

// signedJoins returns the messages with which c joins the channels of mode as user.
func signedJoins(c *conn, mode int, user string) [][]byte {
	a := c.app.cur()
	sign := func(s string) string { return a.Key + ":" + pusher.Sign(a.Secret, s) }
	sub := func(d map[string]string) []byte {
		b, _ := json.Marshal(map[string]any{"event": "pusher:subscribe", "data": d})
		return b
	}
	var out [][]byte
	if mode&modePrivate != 0 {
		out = append(out, sub(map[string]string{"channel": fuzzPrivate, "auth": sign(c.ID() + ":" + fuzzPrivate)}))
	}
	if mode&modePresence != 0 {
		data := `{"user_id":"` + user + `","user_info":{"name":"` + user + `"}}`
		out = append(out, sub(map[string]string{"channel": fuzzPresence, "channel_data": data,
			"auth": sign(c.ID() + ":" + fuzzPresence + ":" + data)}))
	}
	if mode&modeSignin != 0 {
		ud := `{"id":"` + user + `"}`
		b, _ := json.Marshal(map[string]any{"event": "pusher:signin", "data": map[string]string{
			"user_data": ud, "auth": sign(c.ID() + "::user::" + ud)}})
		out = append(out, b)
	}
	if mode&modeCache != 0 {
		out = append(out, sub(map[string]string{"channel": fuzzCache, "auth": sign(c.ID() + ":" + fuzzCache)}))
	}
	return out
}

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	h := testServer(tb, Config{Workers: 2, ActivityTimeout: time.Hour})
	fh := &fuzzServer{h: h, byT: &recTransport{}}
	fh.by = h.attachFake(fh.byT)
	fh.byWS = &ws.Conn{Data: fh.by}
	msgs := signedJoins(fh.by, modePrivate|modePresence|modeSignin|modeCache, "bystander")
	msgs = append(msgs, []byte(`{"event":"pusher:subscribe","data":{"channel":"`+fuzzPublic+`"}}`),
		[]byte(`{"event":"pusher:subscribe","data":{"channel":"#server-to-user-bystander"}}`))
	for _, m := range msgs {
		reader{h}.OnMessage(fh.byWS, ws.OpText, m)
	}
	h.fence()
	frames, err := splitFrames(fh.byT.out)
	if err != nil {
		tb.Fatal(err)
	}
	var got []string
	for _, f := range frames {
		got = append(got, decodeFrame(f).Event)
	}
	want := []string{"pusher_internal:subscription_succeeded", "pusher_internal:subscription_succeeded",
		"pusher:signin_success", "pusher_internal:subscription_succeeded", "pusher:cache_miss",
		"pusher_internal:subscription_succeeded", "pusher_internal:subscription_succeeded"}
	if !slices.Equal(got, want) {
		tb.Fatalf("bystander setup: got %q, want %q", got, want)
	}
	fh.byT.out = nil
	fh.shared = []string{fuzzPrivate, fuzzPresence, fuzzCache, fuzzPublic, "#server-to-user-bystander"}
	fh.base = h.Stats()
	return fh
}

// run connects a fuzzed connection, has it join the channels of mode with valid signatures,
// then delivers msgs as the engine would, and checks the server's answers, the bystander and the
// clean-up after the hang-up.
func (fh *fuzzServer) run(t *testing.T, mode int, msgs [][]byte) {
	h := fh.h
	fh.seq++
	vt := &recTransport{}
	v := h.attachFake(vt)
	wc := &ws.Conn{Data: v}
	// The engine reuses its read buffer: the server must copy what it keeps. Every payload is
	// overwritten after its call, so a reference kept into it shows up as corrupt state.
	deliver := func(op ws.Opcode, p []byte) {
		buf := bytes.Clone(p)
		reader{h}.OnMessage(wc, op, buf)
		for i := range buf {
			buf[i] = '#'
		}
	}
	for _, m := range signedJoins(v, mode, "fuzzer") {
		deliver(ws.OpText, m)
	}
	var sentClose []int // codes of the close frames the client sent
	for _, m := range msgs {
		op := ws.OpText
		if len(m) > 0 {
			switch o := ws.Opcode(m[0]); o {
			case ws.OpBinary, ws.OpClose, ws.OpPing, ws.OpPong:
				op, m = o, m[1:]
			}
		}
		// What the engine guarantees before calling OnMessage; otherwise it reports a
		// protocol error and delivers nothing more.
		if code := engineRefuses(op, m, h.cfg.MaxMessageBytes); code != 0 {
			reader{h}.OnProtocolError(wc, code, "fuzz")
			sentClose = append(sentClose, code)
			break
		}
		if op == ws.OpClose {
			code := ws.CloseNormal
			if len(m) >= 2 {
				code = int(binary.BigEndian.Uint16(m))
			}
			sentClose = append(sentClose, code)
		}
		deliver(op, m)
	}
	h.fence()

	frames, err := splitFrames(vt.out)
	if err != nil {
		t.Fatalf("fuzzed connection: %v\nframes %q", err, vt.out)
	}
	closed := len(frames) > 0 && frames[len(frames)-1].op == ws.OpClose
	if closed != vt.shut {
		t.Fatalf("fuzzed connection: close frame sent %v, shut down %v", closed, vt.shut)
	}
	if closed {
		// The server closes with a code of its own or echoes the client's close frame (whose
		// code the engine does not check yet: see ws.TestCloseFramePayloadValidated).
		code := int(binary.BigEndian.Uint16(frames[len(frames)-1].payload))
		if !validCloseCode(code) && !slices.Contains(sentClose, code) {
			t.Fatalf("fuzzed connection closed with %d", code)
		}
	} else {
		// Still healthy: it answers a ping.
		vt.out = nil
		deliver(ws.OpText, []byte(`{"event":"pusher:ping","data":{}}`))
		h.fence()
		frames, err := splitFrames(vt.out)
		if err != nil || len(frames) != 1 || decodeFrame(frames[0]).Event != "pusher:pong" {
			t.Fatalf("fuzzed connection open but not answering a ping: %q, %v", vt.out, err)
		}
	}

	// The bystander is unaffected: whatever the fuzzed connection sent it (client events,
	// presence changes), it is open, and an event published now reaches it.
	mark := strconv.Itoa(fh.seq)
	if err := h.Publish("app-id", herald.Event{Name: "mark", Channel: fuzzPublic, Data: mark}); err != nil {
		t.Fatal(err)
	}
	h.fence()
	frames, err = splitFrames(fh.byT.out)
	if err != nil {
		t.Fatalf("bystander: %v", err)
	}
	if fh.byT.shut || len(frames) == 0 {
		t.Fatalf("bystander: shut %v, %d frames", fh.byT.shut, len(frames))
	}
	for _, f := range frames[:len(frames)-1] {
		m := decodeFrame(f)
		switch {
		case strings.HasPrefix(m.Event, "client-") && (m.Channel == fuzzPrivate || m.Channel == fuzzPresence || m.Channel == fuzzCache):
		case m.Event == "pusher_internal:member_added" || m.Event == "pusher_internal:member_removed":
		default:
			t.Fatalf("bystander received %s on %q: %s", m.Event, m.Channel, f.payload)
		}
	}
	if m := decodeFrame(frames[len(frames)-1]); m.Event != "mark" || m.Channel != fuzzPublic || string(m.Data) != strconv.Quote(mark) {
		t.Fatalf("bystander's last frame %s, want the mark event", frames[len(frames)-1].payload)
	}
	fh.byT.out = nil

	// After the hang-up the server holds exactly what it held before the fuzzed connection.
	reader{h}.OnHangup(wc)
	h.fence()
	if !vt.closed {
		t.Fatal("fuzzed connection not released after its hang-up")
	}
	if st := h.Stats(); st.Connections != fh.base.Connections || st.Channels != fh.base.Channels {
		t.Fatalf("after the hang-up: %d connections, %d channels; want %d and %d",
			st.Connections, st.Channels, fh.base.Connections, fh.base.Channels)
	}
	for _, name := range fh.shared {
		if st, ok := h.Channel("app-id", name); !ok || st.SubscriptionCount != 1 {
			t.Fatalf("after the hang-up %s has %d subscriptions (occupied %v), want the bystander's", name, st.SubscriptionCount, ok)
		}
	}
	if u := h.Users("app-id", fuzzPresence); !slices.Equal(u, []string{"bystander"}) {
		t.Fatalf("after the hang-up %s has users %q", fuzzPresence, u)
	}
	a := h.state("app-id")
	a.usersMu.Lock()
	users := len(a.users)
	a.usersMu.Unlock()
	if users != 1 {
		t.Fatalf("after the hang-up %d signed-in users, want the bystander", users)
	}
}

// FuzzServerMessages runs arbitrary client messages through the server's message path on a fake
// connection that first joins, by mode, private, presence and cache channels and signs in
// with valid signatures, beside a bystander that has joined all of them (see fuzzServer.run for
// what is checked).
func FuzzServerMessages(f *testing.F) {
	for i, in := range nastyInputs() {
		f.Add(uint8(i%16), in)
	}
	fh := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		fh.run(t, int(mode%16), bytes.Split(data, []byte{0}))
	})
}
