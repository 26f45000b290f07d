package session

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/poll"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/ws"
)

// Hostile messages that run in every plain go test: the seeds of FuzzServerMessages, through the
// fake transport and through a real socket.

// engineRefuses returns the close code with which the engine fails a connection instead of
// delivering payload (0 when it delivers it).
func engineRefuses(op ws.Opcode, payload []byte, max int) int {
	switch {
	case len(payload) > max:
		return ws.CloseTooBig
	case op >= ws.OpClose && len(payload) > 125:
		return ws.CloseProtocolError
	case op == ws.OpText && !utf8.Valid(payload):
		return ws.CloseInvalidData
	}
	return 0
}

// nest returns s wrapped in n levels of open and close.
func nest(n int, open, close, s string) string {
	return strings.Repeat(open, n) + s + strings.Repeat(close, n)
}

// nastyMessages are hostile client messages. Each runs in plain go test (as seeds of
// FuzzServerMessages and in TestNastyMessagesOverSocket).
func nastyMessages() []string {
	big := strings.Repeat("x", 20<<10)
	return []string{
		// Not JSON, or not a message.
		"", " ", "{", "}", "[]", "null", `"pusher:ping"`, "42", `{"event":42}`, `{"event":""}`, `{"event":null}`,
		`{"event":{"a":1}}`, `{"data":{}}`, `{"event":"pusher:ping"`, `{"event":"pusher:ping"}}`, "\ufeff{}",
		`{"event":"x","event":"pusher:ping"}`, `{"Event":"pusher:ping"}`, `{"event":"\ud800"}`, `{"event":"pusher:ping\u0000"}`,
		// Deeply nested JSON: past encoding/json's depth limit, within it, and unbalanced.
		strings.Repeat("[", 60000),
		nest(20000, "[", "]", ""),
		nest(9000, "[", "]", ""),
		nest(12000, `{"a":`, "}", "1"),
		`{"event":"pusher:subscribe","data":` + nest(9000, "[", "]", "") + `}`,
		`{"event":"pusher:subscribe","data":` + nest(20000, "[", "]", "") + `}`,
		`{"event":"pusher:subscribe","data":{"channel":"x","auth":` + nest(5000, `{"a":`, "}", "1") + `}}`,
		`{"event":"client-deep","channel":"private-fuzz","data":` + nest(2000, "[", "]", "") + `}`,
		`{"event":"client-deep","channel":"private-fuzz","data":"` + strings.Repeat("[", 5000) + `"}`,
		// Subscriptions with garbage.
		`{"event":"pusher:subscribe"}`, `{"event":"pusher:subscribe","data":null}`, `{"event":"pusher:subscribe","data":[]}`,
		`{"event":"pusher:subscribe","data":"{"}`, `{"event":"pusher:subscribe","data":"\"{}\""}`,
		`{"event":"pusher:subscribe","data":{"channel":null}}`, `{"event":"pusher:subscribe","data":{"channel":7}}`,
		`{"event":"pusher:subscribe","data":{"channel":""}}`, `{"event":"pusher:subscribe","data":{"channel":"a b"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"` + strings.Repeat("a", 200) + `"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"\u0000"}}`, `{"event":"pusher:subscribe","data":{"channel":"\ud800"}}`,
		`{"event":"pusher:subscribe","data":"{\"channel\":\"double-encoded\"}"}`,
		`{"event":"pusher:subscribe","data":{"channel":"fuzz"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"private-fuzz","auth":"app-key:` + strings.Repeat("0", 64) + `"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"private-fuzz","auth":7}}`,
		`{"event":"pusher:subscribe","data":{"channel":"presence-fuzz","auth":"app-key:00","channel_data":"{"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"presence-fuzz","channel_data":{"user_id":1}}}`,
		`{"event":"pusher:subscribe","data":{"channel":"private-encrypted-fuzz","auth":"x"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"#server-to-user-fuzzer"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"#server-to-user-bystander"}}`,
		`{"event":"pusher:subscribe","data":{"channel":"cache-fuzz"}}`,
		`{"event":"pusher:unsubscribe","data":{"channel":"never-joined"}}`, `{"event":"pusher:unsubscribe","data":7}`,
		`{"event":"pusher:unsubscribe","data":{"channel":"private-fuzz"}}`,
		`{"event":"pusher:unsubscribe","data":{"channel":"presence-fuzz"}}`,
		// Sign-in with garbage.
		`{"event":"pusher:signin"}`, `{"event":"pusher:signin","data":{"auth":"x","user_data":"{}"}}`,
		`{"event":"pusher:signin","data":{"auth":7,"user_data":7}}`, `{"event":"pusher:signin","data":"` + big + `"}`,
		// Client events: not subscribed, on a public channel, too big, bad names, no channel.
		`{"event":"client-x"}`, `{"event":"client-x","channel":"fuzz","data":{}}`,
		`{"event":"client-x","channel":"private-fuzz","data":"` + big + `"}`,
		`{"event":"client-` + strings.Repeat("x", 300) + `","channel":"private-fuzz","data":{}}`,
		`{"event":"client-x","channel":"private-fuzz","data":"\ud800\udfff"}`,
		`{"event":"client-x","channel":"presence-fuzz","data":{"a":[1,2,{"b":null}]}}`,
		`{"event":"client-x","channel":"private-cache-fuzz","data":"cached"}`,
		`{"event":"client-x","channel":"#server-to-user-fuzzer","data":{}}`,
		`{"event":"pusher_internal:member_added","channel":"presence-fuzz","data":{"user_id":"ghost"}}`,
		`{"event":"pusher:error","data":{"code":4200}}`, `{"event":"something","data":{}}`,
	}
}

// nastyInputs are whole fuzz inputs: sequences of messages (separated by a zero byte; a
// first byte 2, 8, 9 or 10 makes a binary, close, ping or pong frame of the rest).
func nastyInputs() [][]byte {
	var out [][]byte
	for _, m := range nastyMessages() {
		out = append(out, []byte(m))
	}
	join := func(ms ...string) []byte { return []byte(strings.Join(ms, "\x00")) }
	out = append(out,
		join(`{"event":"pusher:subscribe","data":{"channel":"a"}}`, `{"event":"pusher:subscribe","data":{"channel":"a"}}`,
			`{"event":"pusher:unsubscribe","data":{"channel":"a"}}`, `{"event":"pusher:unsubscribe","data":{"channel":"a"}}`),
		join(`{"event":"client-a","channel":"private-fuzz","data":"1"}`, `{"event":"client-a","channel":"private-fuzz","data":"2"}`),
		join(slices.Repeat([]string{`{"event":"client-flood","channel":"presence-fuzz","data":"x"}`}, 30)...),
		join("\x08\x03\xe8", `{"event":"pusher:subscribe","data":{"channel":"after-close"}}`),
		join("\x08\x03\xed"), join("\x08\x03"), join("\x08"), join("\x09ping"), join("\x0a"), join("\x02\x00\x01"),
		join("ok\xff"), join("\x09"+strings.Repeat("p", 126)),
		join(`{"event":"pusher:signin","data":{"auth":"x","user_data":"{}"}}`, `{"event":"pusher:subscribe","data":{"channel":"late"}}`),
		[]byte(strings.Repeat("[", 70<<10)),
	)
	return out
}

// TestNastyMessagesAllocateBoundedMemory checks that a message nested as deep as the message
// limit allows costs a bounded amount of memory to refuse (garbage: nothing of it is kept),
// and that refusing it leaves the connection open.
func TestNastyMessagesAllocateBoundedMemory(t *testing.T) {
	h := testServer(t, Config{Workers: 2, ActivityTimeout: time.Hour})
	vt := &recTransport{}
	c := h.attachFake(vt)
	wc := &ws.Conn{Data: c}
	for _, m := range []string{
		strings.Repeat("[", 64<<10),
		nest(32<<10-1, "[", "]", ""),
		`{"event":"pusher:subscribe","data":` + nest(9000, "[", "]", "") + `}`,
		`{"event":"pusher:subscribe","data":` + strings.Repeat(`{"a":`, 10000) + `}`,
	} {
		msg := []byte(m)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 20
		for i := 0; i < runs; i++ {
			reader{h}.OnMessage(wc, ws.OpText, msg)
		}
		runtime.ReadMemStats(&after)
		per := (after.TotalAlloc - before.TotalAlloc) / runs
		h.fence()
		t.Logf("%d-byte message: %d bytes allocated to answer it", len(msg), per)
		// encoding/json's validator keeps one int per open bracket up to its depth limit of
		// 10,000, growing the stack by append, and drops it after a deep document: up to
		// about 360 KB of garbage per message, measured, whatever its length. The bound
		// catches anything that grows with the input beyond that.
		if limit := uint64(512 << 10); per > limit {
			t.Errorf("%d-byte message %.20q...: %d bytes allocated, want at most %d", len(msg), msg, per, limit)
		}
	}
	frames, err := splitFrames(vt.out)
	if err != nil || vt.shut {
		t.Fatalf("frames %v, shut %v", err, vt.shut)
	}
	for _, f := range frames {
		if m := decodeFrame(f); m.Event != "pusher:error" {
			t.Errorf("answered %s, want pusher:error", f.payload)
		}
	}
}

// TestNastyMessagesOverSocket sends every nasty message from a real client through the engine
// and the server, and checks each answer: the connection stays open (it answers a ping) or is
// closed with the expected code, and a bystander on the same channels keeps receiving.
func TestNastyMessagesOverSocket(t *testing.T) {
	h := testServer(t, Config{Workers: 2})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeWS(w, r, strings.TrimPrefix(r.URL.Path, "/app/"))
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	dial := func(channels ...string) (*wstest.Client, string) {
		t.Helper()
		c, err := wstest.Dial(addr, "/app/app-key?protocol=7")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		sid, err := c.SocketID(patience)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range channels {
			auth := ""
			if strings.HasPrefix(ch, "private-") {
				auth = "app-key:" + pusher.Sign("app-secret", sid+":"+ch)
			}
			if err := c.Subscribe(ch, auth, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Expect("pusher_internal:subscription_succeeded", patience); err != nil {
				t.Fatal(err)
			}
		}
		return c, sid
	}
	by, _ := dial(fuzzPublic, fuzzPrivate)
	base := h.Stats()

	type nasty struct {
		name  string
		send  func(c *wstest.Client) error
		close int // 0: the connection stays open and answers a ping
	}
	text := func(s string) func(*wstest.Client) error {
		return func(c *wstest.Client) error { return c.WriteText(s) }
	}
	var cases []nasty
	for i, m := range nastyMessages() {
		code := 0
		if strings.HasPrefix(m, `{"event":"pusher:signin"`) {
			code = herald.CodeUnauthorized.PusherCode()
		}
		if len(m) > 64<<10 {
			code = ws.CloseTooBig
		}
		cases = append(cases, nasty{fmt.Sprintf("message %d %.40q", i, m), text(m), code})
	}
	cases = append(cases,
		nasty{"100k [", text(strings.Repeat("[", 100000)), ws.CloseTooBig},
		nasty{"invalid UTF-8", text(`{"event":"pusher:ping","data":"` + "\xc0\xaf" + `"}`), ws.CloseInvalidData},
		nasty{"declared 2^63-1 bytes", func(c *wstest.Client) error {
			_, err := c.Conn.Write([]byte{0x81, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4})
			return err
		}, ws.CloseTooBig},
		nasty{"binary frame", func(c *wstest.Client) error { return c.WriteFrame(true, 0x2, []byte{0, 1}) }, 0},
		nasty{"unmasked frame", func(c *wstest.Client) error {
			_, err := c.Conn.Write([]byte{0x81, 0x02, '{', '}'})
			return err
		}, ws.CloseProtocolError},
		nasty{"client event with nested data", text(`{"event":"client-deep","channel":"private-fuzz","data":` + nest(3000, "[", "]", "") + `}`), 0},
	)
	for _, tc := range cases {
		c, _ := dial(fuzzPrivate)
		if err := tc.send(c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The server may have closed the connection already: then the ping cannot be sent.
		if err := c.WriteJSON(map[string]any{"event": "pusher:ping", "data": map[string]any{}}); err != nil && tc.close == 0 {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := answer(c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.close {
			t.Errorf("%s: closed with %d (0: answered the ping), want %d", tc.name, got, tc.close)
		}
		c.Close()
		// The bystander still receives.
		if err := h.Publish("app-id", herald.Event{Name: "mark", Channel: fuzzPublic, Data: tc.name}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := by.Read(patience)
			if err != nil || m.Close != 0 {
				t.Fatalf("bystander after %s: %+v, %v", tc.name, m, err)
			}
			if m.Event == "mark" {
				if m.DataString() != tc.name {
					t.Fatalf("bystander after %s: mark %q", tc.name, m.DataString())
				}
				break
			}
			if !strings.HasPrefix(m.Event, "client-") {
				t.Fatalf("bystander after %s: %s %s", tc.name, m.Event, m.Data)
			}
		}
	}
	poll.Until(t, patience, fmt.Sprintf("%d connections and %d channels after the nasty clients left", base.Connections, base.Channels), func() (bool, string) {
		st := h.Stats()
		return st.Connections == base.Connections && st.Channels == base.Channels, fmt.Sprintf("%d and %d", st.Connections, st.Channels)
	})
}

// patience is how long a test waits for anything that normally takes milliseconds. Tests run
// on busy machines (two cores shared with other builds, -race), so it is generous; a passing
// test never waits it out.
const patience = 30 * time.Second

// answer reads until the ping's pong (0) or a close frame (its code).
func answer(c *wstest.Client) (int, error) {
	for {
		m, err := c.Read(patience)
		if err != nil {
			return 0, err
		}
		switch {
		case m.Close != 0:
			return m.Close, nil
		case m.Event == "pusher:pong":
			return 0, nil
		}
	}
}
