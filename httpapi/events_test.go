package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/pusher"
)

func TestPublishOneChannel(t *testing.T) {
	e := newEnv(t)
	a, _ := e.subscriber("room-a")
	b, _ := e.subscriber("room-a", "room-b")
	status, body := e.call("POST", "/apps/1/events", nil,
		eventBody(t, map[string]any{"name": "greet", "channel": "room-a", "data": `{"x":1,"s":"é\"q"}`}))
	e.wantOK(status, body, `{}`)
	expectEvent(t, a, "greet", "room-a", `{"x":1,"s":"é\"q"}`)
	expectEvent(t, b, "greet", "room-a", `{"x":1,"s":"é\"q"}`)

	// Data that is not a JSON string reaches clients as its JSON text.
	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"obj","channel":"room-b","data":{"k":[1,2]}}`)
	e.wantOK(status, body, `{}`)
	expectEvent(t, b, "obj", "room-b", `{"k":[1,2]}`)
}

func TestPublishSeveralChannels(t *testing.T) {
	e := newEnv(t)
	a, _ := e.subscriber("room-a")
	b, _ := e.subscriber("room-b")
	c, _ := e.subscriber("room-a", "room-c")
	status, body := e.call("POST", "/apps/1/events", nil,
		eventBody(t, map[string]any{"name": "multi", "channels": []string{"room-a", "room-b", "room-a", "room-c", "nobody-here", "room-b"}, "data": "hi"}))
	e.wantOK(status, body, `{}`)
	expectEvent(t, a, "multi", "room-a", "hi")
	expectEvent(t, b, "multi", "room-b", "hi")
	expectEvent(t, c, "multi", "room-a", "hi")
	expectEvent(t, c, "multi", "room-c", "hi")
	// Each subscriber got exactly its share, a channel named twice once: the next event is
	// the next publish.
	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"next","channels":["room-a","room-b"],"data":"2"}`)
	e.wantOK(status, body, `{}`)
	expectEvent(t, a, "next", "room-a", "2")
	expectEvent(t, b, "next", "room-b", "2")
	expectEvent(t, c, "next", "room-a", "2")
}

func TestPublishExcludesSocketID(t *testing.T) {
	e := newEnv(t)
	a, sidA := e.subscriber("room-a")
	b, sidB := e.subscriber("room-a")
	status, body := e.call("POST", "/apps/1/events", nil,
		eventBody(t, map[string]any{"name": "echo", "channel": "room-a", "data": "not for a", "socket_id": sidA}))
	e.wantOK(status, body, `{}`)
	expectEvent(t, b, "echo", "room-a", "not for a")
	status, body = e.call("POST", "/apps/1/events", nil,
		eventBody(t, map[string]any{"name": "echo", "channel": "room-a", "data": "not for b", "socket_id": sidB}))
	e.wantOK(status, body, `{}`)
	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"after","channel":"room-a","data":"all"}`)
	e.wantOK(status, body, `{}`)
	// Events reach a subscriber in publish order, so a's next event after the excluded one
	// is the one not for b, and b's is "after".
	expectEvent(t, a, "echo", "room-a", "not for b")
	expectEvent(t, a, "after", "room-a", "all")
	expectEvent(t, b, "after", "room-a", "all")

	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"x","channel":"room-a","data":"","socket_id":"nope"}`)
	wantError(t, status, body, http.StatusBadRequest)
}

func TestAppsAreIsolated(t *testing.T) {
	e := newEnv(t)
	one, _ := e.subscriber("room-a")
	two, _ := e.connect(e.app2.Key)
	if err := two.Subscribe("room-a", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := two.Expect("pusher_internal:subscription_succeeded", wait); err != nil {
		t.Fatal(err)
	}
	status, body := e.call("POST", "/apps/1/events", nil, `{"name":"for-one","channel":"room-a","data":"1"}`)
	e.wantOK(status, body, `{}`)
	path := "/apps/2/events"
	b := `{"name":"for-two","channel":"room-a","data":"2"}`
	status, body = e.do("POST", e.signedURL(e.app2, "POST", path, nil, b, time.Now()), b)
	e.wantOK(status, body, `{}`)
	expectEvent(t, one, "for-one", "room-a", "1")
	expectEvent(t, two, "for-two", "room-a", "2")
	// App 1's credentials do not sign for app 2.
	status, body = e.do("POST", e.signedURL(e.app, "POST", path, nil, b, time.Now()), b)
	wantError(t, status, body, http.StatusUnauthorized)
}

func TestPublishInfo(t *testing.T) {
	e := newEnv(t)
	e.member("presence-room", "u1")
	e.member("presence-room", "u2")
	e.member("presence-room", "u2") // a second connection of the same user
	e.subscriber("room-a")
	status, body := e.call("POST", "/apps/1/events", nil,
		eventBody(t, map[string]any{"name": "n", "channels": []string{"presence-room", "room-a", "empty"}, "data": "d",
			"info": "subscription_count,user_count"}))
	e.wantOK(status, body, `{"channels":{
		"presence-room":{"subscription_count":3,"user_count":2},
		"room-a":{"subscription_count":1},
		"empty":{"subscription_count":0}}}`)
	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"n","channel":"presence-room","data":"d","info":"user_count"}`)
	e.wantOK(status, body, `{"channels":{"presence-room":{"user_count":2}}}`)
}

func TestBatchEvents(t *testing.T) {
	e := newEnv(t)
	a, _ := e.subscriber("room-a")
	b, _ := e.subscriber("room-b")
	status, body := e.call("POST", "/apps/1/batch_events", nil, `{"batch":[
		{"channel":"room-a","name":"b1","data":"one"},
		{"channel":"room-b","name":"b2","data":"two"},
		{"channel":"room-a","name":"b3","data":{"n":3}}]}`)
	e.wantOK(status, body, `{}`)
	expectEvent(t, a, "b1", "room-a", "one")
	expectEvent(t, a, "b3", "room-a", `{"n":3}`)
	expectEvent(t, b, "b2", "room-b", "two")

	status, body = e.call("POST", "/apps/1/batch_events", nil, `{"batch":[
		{"channel":"room-a","name":"i1","data":"x","info":"subscription_count"},
		{"channel":"room-b","name":"i2","data":"y"}]}`)
	e.wantOK(status, body, `{"batch":[{"subscription_count":1},{}]}`)
	expectEvent(t, a, "i1", "room-a", "x")
	expectEvent(t, b, "i2", "room-b", "y")

	// Over the app's batch limit of 3: nothing is published.
	status, body = e.call("POST", "/apps/1/batch_events", nil, `{"batch":[
		{"channel":"room-a","name":"o1","data":"x"},{"channel":"room-a","name":"o2","data":"x"},
		{"channel":"room-a","name":"o3","data":"x"},{"channel":"room-a","name":"o4","data":"x"}]}`)
	wantError(t, status, body, http.StatusBadRequest)
	// One bad event fails the whole batch before anything is published.
	status, body = e.call("POST", "/apps/1/batch_events", nil, `{"batch":[
		{"channel":"room-a","name":"v1","data":"x"},{"channel":"bad channel","name":"v2","data":"x"}]}`)
	wantError(t, status, body, http.StatusBadRequest)
	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"marker","channel":"room-a","data":"m"}`)
	e.wantOK(status, body, `{}`)
	expectEvent(t, a, "marker", "room-a", "m")
}

func TestPublishErrors(t *testing.T) {
	e := newEnv(t)
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("c%d", i)
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"data over the limit", eventBody(t, map[string]any{"name": "n", "channel": "room-a", "data": strings.Repeat("x", 1001)}), http.StatusRequestEntityTooLarge},
		{"101 channels", eventBody(t, map[string]any{"name": "n", "channels": many, "data": "d"}), http.StatusBadRequest},
		{"invalid channel name", `{"name":"n","channel":"has space","data":"d"}`, http.StatusBadRequest},
		{"channel name with a slash", `{"name":"n","channels":["ok","a/b"],"data":"d"}`, http.StatusBadRequest},
		{"channel name too long", eventBody(t, map[string]any{"name": "n", "channel": strings.Repeat("c", 165), "data": "d"}), http.StatusBadRequest},
		{"no channel", `{"name":"n","data":"d"}`, http.StatusBadRequest},
		{"channel and channels", `{"name":"n","channel":"a","channels":["b"],"data":"d"}`, http.StatusBadRequest},
		{"no name", `{"channel":"a","data":"d"}`, http.StatusBadRequest},
		// Pusher answers 400 for a name too long: 413 is for sizes only.
		{"event name too long", eventBody(t, map[string]any{"name": strings.Repeat("n", 201), "channel": "a", "data": "d"}), http.StatusBadRequest},
		{"event name with a control character", `{"name":"a\u0007b","channel":"a","data":"d"}`, http.StatusBadRequest},
		{"socket_id not a socket id", `{"name":"n","channel":"a","data":"d","socket_id":"1.2.3"}`, http.StatusBadRequest},
		{"not JSON", `{"name":`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.call("POST", "/apps/1/events", nil, tc.body)
			wantError(t, status, body, tc.status)
		})
	}
	// Data of exactly the limit is accepted.
	status, body := e.call("POST", "/apps/1/events", nil, eventBody(t, map[string]any{"name": "n", "channel": "room-a", "data": strings.Repeat("x", 1000)}))
	e.wantOK(status, body, `{}`)
	// 100 channels are accepted.
	status, body = e.call("POST", "/apps/1/events", nil, eventBody(t, map[string]any{"name": "n", "channels": many[:100], "data": "d"}))
	e.wantOK(status, body, `{}`)
	// A body over the server's limit is refused before anything else.
	big := `{"name":"n","channel":"a","data":"` + strings.Repeat("x", 64<<10) + `"}`
	status, body = e.call("POST", "/apps/1/events", nil, big)
	wantError(t, status, body, http.StatusRequestEntityTooLarge)
}

func TestSignatureChecks(t *testing.T) {
	e := newEnv(t)
	const path = "/apps/1/events"
	const good = `{"name":"n","channel":"room-a","data":"d"}`
	now := time.Now()

	tamper := func(edit func(q url.Values)) string {
		q := signedQuery(e, "POST", path, good, now)
		edit(q)
		return e.srv.URL + path + "?" + q.Encode()
	}
	for _, tc := range []struct {
		name string
		url  string
		body string
	}{
		{"bad signature", tamper(func(q url.Values) { q.Set("auth_signature", strings.Repeat("0", 64)) }), good},
		{"signature of another secret", e.signedURL(e.app2, "POST", path, nil, good, now), good},
		{"wrong body_md5", e.signedURL(e.app, "POST", path, nil, `{"name":"n","channel":"room-b","data":"d"}`, now), good},
		{"body_md5 removed", tamper(func(q url.Values) { q.Del("body_md5") }), good},
		{"timestamp 700s old", e.signedURL(e.app, "POST", path, nil, good, now.Add(-700*time.Second)), good},
		{"timestamp 700s ahead", e.signedURL(e.app, "POST", path, nil, good, now.Add(700*time.Second)), good},
		{"no signature", e.srv.URL + path, good},
		{"signed for another path", e.srv.URL + path + "?" + signedQuery(e, "POST", "/apps/1/batch_events", good, now).Encode(), good},
		{"signed for GET", e.srv.URL + path + "?" + signedQuery(e, "GET", path, good, now).Encode(), good},
		{"extra parameter added", tamper(func(q url.Values) { q.Set("info", "subscription_count") }), good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.do("POST", tc.url, tc.body)
			wantError(t, status, body, http.StatusUnauthorized)
		})
	}
	// The same request, correctly signed, and within the window, passes.
	status, body := e.do("POST", e.signedURL(e.app, "POST", path, nil, good, now.Add(-500*time.Second)), good)
	e.wantOK(status, body, `{}`)
}

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	body := `{"name":"n","channel":"room-a","data":"d"}`
	status, b := e.do("POST", e.signedURL(e.app, "POST", "/apps/999/events", nil, body, time.Now()), body)
	wantError(t, status, b, http.StatusNotFound)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/nope"},
		{"GET", "/apps/1/events"},
		{"DELETE", "/apps/1/channels"},
		{"POST", "/apps/1/unknown"},
		{"GET", "/apps"},
	} {
		status, b := e.do(tc.method, e.signedURL(e.app, tc.method, tc.path, nil, "", time.Now()), "")
		wantError(t, status, b, http.StatusNotFound)
	}
	status, b = e.do("GET", e.srv.URL+"/", "")
	e.wantOK(status, b, `{"server":"herald"}`)
}

// signedQuery signs a request for app 1 and returns its query, to tamper with or to send
// elsewhere.
func signedQuery(e *env, method, path, body string, now time.Time) url.Values {
	return pusher.SignRequest(e.app, method, path, nil, []byte(body), now)
}

// TestReservedEventNamesRefused: a publisher cannot send the protocol's own events
// (pusher:error to a private channel, a fake pusher_internal:member_added): 400, a JSON error
// that says why, and no subscriber gets anything.
func TestReservedEventNamesRefused(t *testing.T) {
	e := newEnv(t)
	a, _ := e.subscriber("room-a")
	for _, body := range []string{
		`{"name":"pusher:error","channel":"room-a","data":"{\"code\":4009}"}`,
		`{"name":"pusher_internal:member_added","channels":["room-a"],"data":"{\"user_id\":\"x\"}"}`,
	} {
		status, resp := e.call("POST", "/apps/1/events", nil, body)
		if msg := wantError(t, status, resp, http.StatusBadRequest); !strings.Contains(msg, "reserved") {
			t.Errorf("%s: error %q does not say the name is reserved", body, msg)
		}
	}
	status, resp := e.call("POST", "/apps/1/batch_events", nil,
		`{"batch":[{"name":"ok","channel":"room-a","data":"x"},{"name":"pusher:subscription_succeeded","channel":"room-a","data":"{}"}]}`)
	if msg := wantError(t, status, resp, http.StatusBadRequest); !strings.Contains(msg, "batch[1]") || !strings.Contains(msg, "reserved") {
		t.Errorf("batch: error %q", msg)
	}
	// Nothing above reached the subscriber: its next event is this one.
	status, resp = e.call("POST", "/apps/1/events", nil, `{"name":"after","channel":"room-a","data":"x"}`)
	e.wantOK(status, resp, `{}`)
	expectEvent(t, a, "after", "room-a", "x")
}
