package pusher

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
)

// wantErr fails t unless err is a *herald.Error with code whose message contains msg.
func wantErr(t *testing.T, err error, code herald.Code, msg string) {
	t.Helper()
	var e *herald.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *herald.Error", err, err)
	}
	if e.Code != code || !strings.Contains(e.Message, msg) {
		t.Fatalf("error = code %d %q, want code %d containing %q", e.Code, e.Message, code, msg)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		in   string
		want Message
	}{
		{`{"event":"pusher:ping","data":{}}`, Message{Event: "pusher:ping", Data: json.RawMessage(`{}`)}},
		{`{"event":"pusher:ping"}`, Message{Event: "pusher:ping"}},
		{`{"event":"pusher:subscribe","data":{"auth":"","channel":"my-channel"}}`,
			Message{Event: "pusher:subscribe", Data: json.RawMessage(`{"auth":"","channel":"my-channel"}`)}},
		{` { "event" : "client-x" , "channel" : "private-a" , "data" : "hi" } `,
			Message{Event: "client-x", Channel: "private-a", Data: json.RawMessage(`"hi"`)}},
		{`{"event":"client-x","channel":"private-a","data":[1,{"a":"]}"}]}`,
			Message{Event: "client-x", Channel: "private-a", Data: json.RawMessage(`[1,{"a":"]}"}]`)}},
		{`{"event":"e","channel":null,"data":null}`, Message{Event: "e"}},
		{`{"data":12.5e3,"event":"e"}`, Message{Event: "e", Data: json.RawMessage(`12.5e3`)}},
		{`{"event":"\u0070usher:ping"}`, Message{Event: "pusher:ping"}},
		{`{"\u0065vent":"escaped-key"}`, Message{Event: "escaped-key"}},
		{`{"event":"first","event":"last"}`, Message{Event: "last"}},
		{`{"Event":"ignored","event":"e","nested":{"event":"no"}}`, Message{Event: "e"}},
		{`{"event":"a\"b\\c\n"}`, Message{Event: "a\"b\\c\n"}},
		{"{\"event\":\"bad\xffutf8\"}", Message{Event: "bad\ufffdutf8"}},
	}
	for _, tt := range tests {
		got, err := Decode([]byte(tt.in))
		if err != nil {
			t.Errorf("Decode(%s): %v", tt.in, err)
			continue
		}
		if got.Event != tt.want.Event || got.Channel != tt.want.Channel || !bytes.Equal(got.Data, tt.want.Data) {
			t.Errorf("Decode(%s) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{``, "not valid JSON"},
		{`{"event":"x"`, "not valid JSON"},
		{`{"event":"x"} {}`, "not valid JSON"},
		{`[{"event":"x"}]`, "must be a JSON object"},
		{`"pusher:ping"`, "must be a JSON object"},
		{`null`, "must be a JSON object"},
		{`{}`, "has no event"},
		{`{"data":{"event":"x"}}`, "has no event"},
		{`{"event":""}`, "must not be empty"},
		{`{"event":null}`, "must be a string"},
		{`{"event":42}`, "must be a string"},
		{`{"event":["x"]}`, "must be a string"},
		{`{"event":"e","channel":7}`, "channel must be a string"},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.in))
		if err == nil {
			t.Errorf("Decode(%s) succeeded", tt.in)
			continue
		}
		wantErr(t, err, herald.CodeInvalid, tt.msg)
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	b := []byte(`{"event":"e","data":{"a":1}}`)
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'x'
	}
	if string(m.Data) != `{"a":1}` || m.Event != "e" {
		t.Fatalf("message changed with its buffer: %+v", m)
	}
}

func TestDataString(t *testing.T) {
	tests := []struct{ data, want string }{
		{``, ``},
		{`"hello"`, `hello`},
		{`"{\"a\":1}"`, `{"a":1}`},
		{`{"a":1}`, `{"a":1}`},
		{`12`, `12`},
	}
	for _, tt := range tests {
		if got := (Message{Data: json.RawMessage(tt.data)}).DataString(); got != tt.want {
			t.Errorf("DataString(%s) = %q, want %q", tt.data, got, tt.want)
		}
	}
}

func TestDecodeSubscribe(t *testing.T) {
	tests := []struct {
		in   string
		want Subscribe
	}{
		{`{"channel":"my-channel"}`, Subscribe{Channel: "my-channel"}},
		{`{"auth":"","channel":"my-channel"}`, Subscribe{Channel: "my-channel"}},
		{`{"auth":"k:s","channel_data":"{\"user_id\":1}","channel":"presence-a"}`,
			Subscribe{Channel: "presence-a", Auth: "k:s", ChannelData: `{"user_id":1}`}},
		{`{"channel":"private-a","auth":null,"channel_data":null}`, Subscribe{Channel: "private-a"}},
		{`"{\"channel\":\"double\",\"auth\":\"k:s\"}"`, Subscribe{Channel: "double", Auth: "k:s"}},
		{` {"channel":"x","extra":[1,2]} `, Subscribe{Channel: "x"}},
	}
	for _, tt := range tests {
		got, err := DecodeSubscribe(json.RawMessage(tt.in))
		if err != nil {
			t.Errorf("DecodeSubscribe(%s): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("DecodeSubscribe(%s) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	errs := []struct{ in, msg string }{
		{``, "has no data"},
		{`null`, "has no data"},
		{`{`, "not valid JSON"},
		{`[]`, "must be a JSON object"},
		{`"not json"`, "does not hold valid JSON"},
		{`"\"x\""`, "must be a JSON object"},
		{`{}`, "has no channel"},
		{`{"channel":""}`, "has no channel"},
		{`{"channel":5}`, "channel must be a string"},
		{`{"channel":"a","auth":true}`, "auth must be a string"},
		{`{"channel":"a","channel_data":{"user_id":1}}`, "channel_data must be a string"},
	}
	for _, tt := range errs {
		_, err := DecodeSubscribe(json.RawMessage(tt.in))
		if err == nil {
			t.Errorf("DecodeSubscribe(%s) succeeded", tt.in)
			continue
		}
		wantErr(t, err, herald.CodeInvalid, tt.msg)
	}
}

func TestDecodeSignin(t *testing.T) {
	got, err := DecodeSignin(json.RawMessage(`{"auth":"k:s","user_data":"{\"id\":\"1\"}"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Signin{Auth: "k:s", UserData: `{"id":"1"}`}); got != want {
		t.Fatalf("DecodeSignin = %+v, want %+v", got, want)
	}
	errs := []struct{ in, msg string }{
		{`{}`, "has no auth"},
		{`{"auth":"k:s"}`, "has no user_data"},
		{`{"auth":"k:s","user_data":{"id":"1"}}`, "user_data must be a string"},
		{`7`, "must be a JSON object"},
	}
	for _, tt := range errs {
		_, err := DecodeSignin(json.RawMessage(tt.in))
		if err == nil {
			t.Errorf("DecodeSignin(%s) succeeded", tt.in)
			continue
		}
		wantErr(t, err, herald.CodeInvalid, tt.msg)
	}
}

// FuzzDecode checks Decode against encoding/json's reading of the same bytes (exact, last-wins
// keys) and runs the data decoders on whatever it finds: none may panic.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"event":"pusher:ping","data":{}}`,
		`{"event":"pusher:subscribe","data":{"auth":"k:0f","channel":"presence-a","channel_data":"{\"user_id\":1,\"user_info\":{}}"}}`,
		`{"event":"pusher:signin","data":{"auth":"k:s","user_data":"{\"id\":\"1\",\"watchlist\":[\"2\"]}"}}`,
		`{"event":"client-x","channel":"private-a","data":"{\"channel\":\"x\"}"}`,
		`{"event":"\u00e9","data":[1,"]}",{"a":null}]}`,
		`[1]`, `{"event":1}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		var ref map[string]json.RawMessage
		refErr := json.Unmarshal(b, &ref)
		if err != nil {
			var e *herald.Error
			if !errors.As(err, &e) || e.Code != herald.CodeInvalid {
				t.Fatalf("Decode error %v is not CodeInvalid", err)
			}
			if refErr == nil {
				var ev string
				if json.Unmarshal(ref["event"], &ev) == nil && ev != "" && chanOK(ref["channel"]) {
					t.Fatalf("Decode(%q) = %v; encoding/json reads event %q", b, err, ev)
				}
			}
			return
		}
		if refErr != nil {
			t.Fatalf("Decode(%q) accepted what encoding/json refuses: %v", b, refErr)
		}
		var ev, ch string
		if json.Unmarshal(ref["event"], &ev) != nil || ev != m.Event {
			t.Fatalf("event %q, encoding/json %q", m.Event, ev)
		}
		if c := ref["channel"]; len(c) > 0 && string(c) != "null" {
			if json.Unmarshal(c, &ch) != nil || ch != m.Channel {
				t.Fatalf("channel %q, encoding/json %s", m.Channel, c)
			}
		}
		if d := ref["data"]; string(d) == "null" {
			if m.Data != nil {
				t.Fatalf("data %s for null", m.Data)
			}
		} else if !bytes.Equal(d, m.Data) {
			t.Fatalf("data %s, encoding/json %s", m.Data, d)
		}
		if sub, err := DecodeSubscribe(m.Data); err == nil {
			if sub.Channel == "" {
				t.Fatal("subscription without channel accepted")
			}
			if sub.ChannelData != "" {
				if mem, err := DecodePresenceData(sub.ChannelData); err == nil && mem.UserID == "" {
					t.Fatal("presence member without id accepted")
				}
			}
		}
		if si, err := DecodeSignin(m.Data); err == nil {
			if u, err := DecodeUserData(si.UserData); err == nil && u.ID == "" {
				t.Fatal("user data without id accepted")
			}
		}
		checkPresenceData(t, m.DataString())
		if u, err := DecodeUserData(m.DataString()); err == nil {
			var ref struct {
				ID string `json:"id"`
			}
			if json.Unmarshal([]byte(m.DataString()), &ref) != nil || ref.ID != u.ID {
				t.Fatalf("user_data %q: id %q, encoding/json %q", m.DataString(), u.ID, ref.ID)
			}
		}
	})
}

// checkPresenceData compares a successful DecodePresenceData with encoding/json's reading.
func checkPresenceData(t *testing.T, s string) {
	m, err := DecodePresenceData(s)
	if err != nil {
		return
	}
	var ref map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &ref); err != nil {
		t.Fatalf("channel_data %q accepted, encoding/json: %v", s, err)
	}
	var id string
	if json.Unmarshal(ref["user_id"], &id) == nil && id != m.UserID {
		t.Fatalf("channel_data %q: user_id %q, encoding/json %q", s, m.UserID, id)
	}
	if info := ref["user_info"]; string(info) != "null" && !bytes.Equal(info, m.Info) || string(info) == "null" && m.Info != nil {
		t.Fatalf("channel_data %q: user_info %s, encoding/json %s", s, m.Info, info)
	}
}

func chanOK(c json.RawMessage) bool {
	var s *string
	return len(c) == 0 || json.Unmarshal(c, &s) == nil
}

func BenchmarkDecode(b *testing.B) {
	for _, bc := range []struct{ name, msg string }{
		{"ping", `{"event":"pusher:ping","data":{}}`},
		{"subscribe", `{"event":"pusher:subscribe","data":{"auth":"278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4","channel":"private-foobar"}}`},
		{"client-event", `{"event":"client-typing","channel":"presence-room-42","data":{"user":"ada","text":"hello there, this is a short chat message"}}`},
	} {
		msg := []byte(bc.msg)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, err := Decode(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
