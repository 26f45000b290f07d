package pusher

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/herald-rt/herald"
)

// pusherJS reads a frame as pusher-js 8 does (protocol.ts decodeMessage): JSON.parse the frame,
// then JSON.parse its data when that is a string, keeping the string if it is not JSON.
func pusherJS(t *testing.T, frame []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(frame, &m); err != nil {
		t.Fatalf("frame %s is not JSON: %v", frame, err)
	}
	if s, ok := m["data"].(string); ok {
		var v any
		if json.Unmarshal([]byte(s), &v) == nil {
			m["data"] = v
		}
	}
	return m
}

// jsonValue is what JSON.parse makes of s.
func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestFrameBytes(t *testing.T) {
	ada := herald.Member{UserID: "ada", Info: json.RawMessage(`{"name":"Ada \"L\""}`)}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"event", AppendEvent(nil, "my-event", "my-channel", `{"message":"hello world"}`, ""),
			`{"event":"my-event","channel":"my-channel","data":"{\"message\":\"hello world\"}"}`},
		{"event no channel", AppendEvent(nil, "e", "", "plain", ""), `{"event":"e","data":"plain"}`},
		{"client event", AppendEvent(nil, "client-x", "presence-a", "{}", "ada"),
			`{"event":"client-x","channel":"presence-a","data":"{}","user_id":"ada"}`},
		{"error", AppendError(nil, 4009, "Connection not authorized"),
			`{"event":"pusher:error","data":{"code":4009,"message":"Connection not authorized"}}`},
		{"established", AppendConnectionEstablished(nil, "1.2", 120),
			`{"event":"pusher:connection_established","data":"{\"socket_id\":\"1.2\",\"activity_timeout\":120}"}`},
		{"established default", AppendConnectionEstablished(nil, "1.2", 0),
			`{"event":"pusher:connection_established","data":"{\"socket_id\":\"1.2\",\"activity_timeout\":120}"}`},
		{"succeeded", AppendSubscriptionSucceeded(nil, "my-channel", nil, false),
			`{"event":"pusher_internal:subscription_succeeded","channel":"my-channel","data":"{}"}`},
		{"succeeded presence", AppendSubscriptionSucceeded(nil, "presence-a", []herald.Member{ada, {UserID: "7"}}, true),
			`{"event":"pusher_internal:subscription_succeeded","channel":"presence-a","data":"{\"presence\":{\"ids\":[\"ada\",\"7\"],\"hash\":{\"ada\":{\"name\":\"Ada \\\"L\\\"\"},\"7\":null},\"count\":2}}"}`},
		{"succeeded empty presence", AppendSubscriptionSucceeded(nil, "presence-a", nil, true),
			`{"event":"pusher_internal:subscription_succeeded","channel":"presence-a","data":"{\"presence\":{\"ids\":[],\"hash\":{},\"count\":0}}"}`},
		{"subscription error", AppendSubscriptionError(nil, "private-a", "AuthError", "Invalid signature", 401),
			`{"event":"pusher:subscription_error","channel":"private-a","data":"{\"type\":\"AuthError\",\"error\":\"Invalid signature\",\"status\":401}"}`},
		{"member added", AppendMemberAdded(nil, "presence-a", ada),
			`{"event":"pusher_internal:member_added","channel":"presence-a","data":"{\"user_id\":\"ada\",\"user_info\":{\"name\":\"Ada \\\"L\\\"\"}}"}`},
		{"member added no info", AppendMemberAdded(nil, "presence-a", herald.Member{UserID: "7", Info: json.RawMessage(`{bad`)}),
			`{"event":"pusher_internal:member_added","channel":"presence-a","data":"{\"user_id\":\"7\",\"user_info\":null}"}`},
		{"member removed", AppendMemberRemoved(nil, "presence-a", "ada"),
			`{"event":"pusher_internal:member_removed","channel":"presence-a","data":"{\"user_id\":\"ada\"}"}`},
		{"signin success", AppendSigninSuccess(nil, `{"id":"1"}`),
			`{"event":"pusher:signin_success","data":"{\"user_data\":\"{\\\"id\\\":\\\"1\\\"}\"}"}`},
		{"cache miss", AppendCacheMiss(nil, "cache-a"), `{"event":"pusher:cache_miss","channel":"cache-a"}`},
		{"subscription count", AppendSubscriptionCount(nil, "my-channel", 3),
			`{"event":"pusher_internal:subscription_count","channel":"my-channel","data":"{\"subscription_count\":3}"}`},
		{"watchlist", AppendWatchlistEvent(nil, "online", []string{"1", "2"}),
			`{"event":"pusher_internal:watchlist_events","data":"{\"events\":[{\"name\":\"online\",\"user_ids\":[\"1\",\"2\"]}]}"}`},
		{"watchlist status", AppendWatchlistStatus(nil, []string{"1"}, []string{"2", "3"}),
			`{"event":"pusher_internal:watchlist_events","data":"{\"events\":[{\"name\":\"online\",\"user_ids\":[\"1\"]},{\"name\":\"offline\",\"user_ids\":[\"2\",\"3\"]}]}"}`},
		{"watchlist status offline only", AppendWatchlistStatus(nil, nil, []string{"2"}),
			`{"event":"pusher_internal:watchlist_events","data":"{\"events\":[{\"name\":\"offline\",\"user_ids\":[\"2\"]}]}"}`},
		{"ping", PingPayload, `{"event":"pusher:ping","data":"{}"}`},
		{"pong", PongPayload, `{"event":"pusher:pong","data":"{}"}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
		if !json.Valid(tt.got) {
			t.Errorf("%s: not valid JSON", tt.name)
		}
	}
}

func TestAppendEventDecodes(t *testing.T) {
	for _, event := range tricky[:6] {
		for _, data := range tricky {
			for _, user := range []string{"", "u\"1\xff"} {
				var m struct {
					Event   string  `json:"event"`
					Channel *string `json:"channel"`
					Data    string  `json:"data"`
					UserID  *string `json:"user_id"`
				}
				frame := AppendEvent([]byte("junk"), event, "presence-a", data, user)[4:]
				if err := json.Unmarshal(frame, &m); err != nil {
					t.Fatalf("AppendEvent(%q, %q) = %s: %v", event, data, frame, err)
				}
				if m.Event != sanitized(event) || m.Channel == nil || *m.Channel != "presence-a" || m.Data != sanitized(data) {
					t.Fatalf("AppendEvent(%q, %q) decodes to %+v", event, data, m)
				}
				if (user == "") != (m.UserID == nil) || user != "" && *m.UserID != sanitized(user) {
					t.Fatalf("AppendEvent user %q decodes to %v", user, m.UserID)
				}
			}
		}
	}
}

// TestFramesAsPusherJSReadsThem reads each frame the way pusher-js does and checks the fields
// its handlers use (connection_manager.ts, members.ts, channel.ts, user.ts, watchlist.ts).
func TestFramesAsPusherJSReadsThem(t *testing.T) {
	for _, s := range tricky {
		// Handshake: data.socket_id and a non-zero data.activity_timeout.
		m := pusherJS(t, AppendConnectionEstablished(nil, s, 30))
		data := m["data"].(map[string]any)
		if data["socket_id"] != sanitized(s) || data["activity_timeout"] != 30.0 {
			t.Fatalf("handshake for %q read as %v", s, m)
		}
		// Error: data.code, data.message.
		m = pusherJS(t, AppendError(nil, 4001, s))
		if d := m["data"].(map[string]any); d["code"] != 4001.0 || d["message"] != sanitized(s) {
			t.Fatalf("error read as %v", m)
		}
		// Presence: data.presence.hash[id] is the info, data.presence.count the size.
		members := []herald.Member{{UserID: s + "1", Info: json.RawMessage(`{"n":` + string(AppendString(nil, s)) + "}")}, {UserID: s + "2"}}
		m = pusherJS(t, AppendSubscriptionSucceeded(nil, "presence-"+s, members, true))
		want := map[string]any{
			"presence": map[string]any{
				"ids":   []any{sanitized(s) + "1", sanitized(s) + "2"},
				"hash":  map[string]any{sanitized(s) + "1": map[string]any{"n": sanitized(s)}, sanitized(s) + "2": nil},
				"count": 2.0,
			},
		}
		if m["event"] != "pusher_internal:subscription_succeeded" || m["channel"] != sanitized("presence-"+s) || !reflect.DeepEqual(m["data"], want) {
			t.Fatalf("presence subscription_succeeded read as %#v", m)
		}
		// member_added: data.user_id, data.user_info; member_removed: data.user_id.
		m = pusherJS(t, AppendMemberAdded(nil, "presence-a", members[0]))
		if d := m["data"].(map[string]any); d["user_id"] != sanitized(s)+"1" || !reflect.DeepEqual(d["user_info"], map[string]any{"n": sanitized(s)}) {
			t.Fatalf("member_added read as %v", m)
		}
		m = pusherJS(t, AppendMemberRemoved(nil, "presence-a", s))
		if d := m["data"].(map[string]any); d["user_id"] != sanitized(s) || len(d) != 1 {
			t.Fatalf("member_removed read as %v", m)
		}
		// subscription_error: data.type, data.error, data.status.
		m = pusherJS(t, AppendSubscriptionError(nil, "private-a", "AuthError", s, 401))
		if d := m["data"].(map[string]any); d["type"] != "AuthError" || d["error"] != sanitized(s) || d["status"] != 401.0 {
			t.Fatalf("subscription_error read as %v", m)
		}
		// Channel event: data is JSON.parsed when it is JSON, kept as a string otherwise.
		m = pusherJS(t, AppendEvent(nil, "my-event", "my-channel", s, ""))
		var asJSON any
		if json.Unmarshal([]byte(sanitized(s)), &asJSON) == nil {
			if !reflect.DeepEqual(m["data"], asJSON) {
				t.Fatalf("event data %q read as %#v", s, m["data"])
			}
		} else if m["data"] != sanitized(s) {
			t.Fatalf("event data %q read as %#v", s, m["data"])
		}
		// Watchlist: data.events[i].name and .user_ids.
		m = pusherJS(t, AppendWatchlistEvent(nil, "offline", []string{s}))
		wantWL := map[string]any{"events": []any{map[string]any{"name": "offline", "user_ids": []any{sanitized(s)}}}}
		if !reflect.DeepEqual(m["data"], wantWL) {
			t.Fatalf("watchlist read as %#v", m["data"])
		}
		m = pusherJS(t, AppendWatchlistStatus(nil, []string{s}, []string{s + "2"}))
		wantWL = map[string]any{"events": []any{map[string]any{"name": "online", "user_ids": []any{sanitized(s)}},
			map[string]any{"name": "offline", "user_ids": []any{sanitized(s + "2")}}}}
		if !reflect.DeepEqual(m["data"], wantWL) {
			t.Fatalf("watchlist status read as %#v", m["data"])
		}
	}
	// Signin: JSON.parse(data.user_data) must give back the user data with its string id.
	userData := `{"id":"1\u2028\"x\"","user_info":{"name":"Ada\\n"},"watchlist":["2"]}`
	m := pusherJS(t, AppendSigninSuccess(nil, userData))
	ud, ok := m["data"].(map[string]any)["user_data"].(string)
	if !ok || ud != userData {
		t.Fatalf("signin_success data.user_data = %#v, want the string %s", m["data"], userData)
	}
	if got := jsonValue(t, ud).(map[string]any)["id"]; got != "1\u2028\"x\"" {
		t.Fatalf("user_data id = %#v", got)
	}
	// cache_miss has a channel and no data; subscription_count has data.subscription_count.
	if m := pusherJS(t, AppendCacheMiss(nil, "cache-a")); m["channel"] != "cache-a" || m["data"] != nil {
		t.Fatalf("cache_miss read as %v", m)
	}
	if m := pusherJS(t, AppendSubscriptionCount(nil, "a", 12)); m["data"].(map[string]any)["subscription_count"] != 12.0 {
		t.Fatalf("subscription_count read as %v", m)
	}
}

func TestPresenceInfoEdgeCases(t *testing.T) {
	infos := []string{``, `null`, `{"a":[1,2,{"b":"\u2028"}]}`, "\"raw\u2028sep\"", `  {"spaced" : true}  `, `"\ud800"`, `{bad`, `1 2`, "\"x\xffy\""}
	for _, info := range infos {
		m := herald.Member{UserID: "u", Info: json.RawMessage(info)}
		frame := AppendMemberAdded(nil, "presence-a", m)
		d := pusherJS(t, frame)["data"]
		obj, ok := d.(map[string]any)
		if !ok {
			t.Fatalf("info %q: data %#v is not an object (frame %s)", info, d, frame)
		}
		var want any
		if json.Valid([]byte(info)) {
			json.Unmarshal([]byte(info), &want)
		}
		if !reflect.DeepEqual(obj["user_info"], want) {
			t.Errorf("info %q read as %#v, want %#v", info, obj["user_info"], want)
		}
	}
}

func TestFrameAllocs(t *testing.T) {
	buf := make([]byte, 0, 8192)
	data := strings.Repeat(`{"message":"hello \"world\"","n":1}`, 20)
	members := []herald.Member{{UserID: "1", Info: json.RawMessage(`{"name":"Ada"}`)}, {UserID: "2"}}
	frames := map[string]func(){
		"AppendEvent":                 func() { buf = AppendEvent(buf[:0], "my-event", "presence-room", data, "user-1") },
		"AppendError":                 func() { buf = AppendError(buf[:0], 4301, "rate limited") },
		"AppendConnectionEstablished": func() { buf = AppendConnectionEstablished(buf[:0], "123.456", 120) },
		"AppendSubscriptionSucceeded": func() { buf = AppendSubscriptionSucceeded(buf[:0], "presence-a", members, true) },
		"AppendSubscriptionError":     func() { buf = AppendSubscriptionError(buf[:0], "private-a", "AuthError", "bad", 401) },
		"AppendMemberAdded":           func() { buf = AppendMemberAdded(buf[:0], "presence-a", members[0]) },
		"AppendMemberRemoved":         func() { buf = AppendMemberRemoved(buf[:0], "presence-a", "1") },
		"AppendSigninSuccess":         func() { buf = AppendSigninSuccess(buf[:0], `{"id":"1"}`) },
		"AppendCacheMiss":             func() { buf = AppendCacheMiss(buf[:0], "cache-a") },
		"AppendSubscriptionCount":     func() { buf = AppendSubscriptionCount(buf[:0], "a", 3) },
		"AppendWatchlistEvent":        func() { buf = AppendWatchlistEvent(buf[:0], "online", []string{"1"}) },
		"AppendWatchlistStatus":       func() { buf = AppendWatchlistStatus(buf[:0], []string{"1"}, []string{"2"}) },
	}
	for name, fn := range frames {
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s allocates %v times into a big enough buffer", name, n)
		}
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"small", `{"message":"hello world"}`},
		{"1KiB", strings.Repeat(`{"k":"value"},`, 73)},
		{"1KiB-text", strings.Repeat("plain text ", 93)},
	} {
		buf := make([]byte, 0, 4096)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				buf = AppendEvent(buf[:0], "my-event", "private-orders", bc.data, "")
			}
		})
	}
}

func TestAppendPositionAndRecovery(t *testing.T) {
	for _, tc := range []struct {
		got  []byte
		want string
	}{
		{AppendPosition(nil, "auction-1", `e"1`, 42), `{"event":"pusher_internal:position","channel":"auction-1","data":"{\"epoch\":\"e\\\"1\",\"offset\":42}"}`},
		{AppendRecovery(nil, "a", "e", 7, false, false, ""), `{"event":"pusher_internal:recovery","channel":"a","data":"{\"epoch\":\"e\",\"offset\":7}"}`},
		{AppendRecovery(nil, "a", "e", 7, true, true, ""), `{"event":"pusher_internal:recovery","channel":"a","data":"{\"epoch\":\"e\",\"offset\":7,\"recovered\":true}"}`},
		{AppendNoHistory(nil, "a"), `{"event":"pusher_internal:recovery","channel":"a","data":"{\"recovered\":false,\"reason\":\"no_history\"}"}`},
		{AppendRecoveryUnknown(nil, "a"), `{"event":"pusher_internal:recovery","channel":"a","data":"{}"}`},
		{AppendRecovery(nil, "a", "", 0, true, false, "too_old"), `{"event":"pusher_internal:recovery","channel":"a","data":"{\"epoch\":\"\",\"offset\":0,\"recovered\":false,\"reason\":\"too_old\"}"}`},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
		var outer struct{ Data string }
		if err := json.Unmarshal(tc.got, &outer); err != nil || !json.Valid([]byte(outer.Data)) {
			t.Errorf("%s: data is not a JSON string holding JSON: %v", tc.got, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AppendPosition(make([]byte, 0, 256), "auction-1", "3f9c1a0e.1", 42) }); n > 1 {
		t.Errorf("AppendPosition allocates %v times, want only its buffer", n)
	}
}
