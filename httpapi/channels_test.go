package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

// occupy fills app 1 with: presence-a (users u1, u2), presence-b (u3), private-x and
// public-y (two subscribers).
func occupy(e *env) {
	e.member("presence-a", "u1")
	e.member("presence-a", "u2")
	e.member("presence-b", "u3")
	e.subscriber("private-x", "public-y")
	e.subscriber("public-y")
}

func TestGetChannels(t *testing.T) {
	e := newEnv(t)
	occupy(e)
	q := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	status, body := e.call("GET", "/apps/1/channels", nil, "")
	e.wantOK(status, body, `{"channels":{"presence-a":{},"presence-b":{},"private-x":{},"public-y":{}}}`)
	status, body = e.call("GET", "/apps/1/channels", q("filter_by_prefix", "presence-", "info", "user_count"), "")
	e.wantOK(status, body, `{"channels":{"presence-a":{"user_count":2},"presence-b":{"user_count":1}}}`)
	status, body = e.call("GET", "/apps/1/channels", q("filter_by_prefix", "p", "info", "subscription_count"), "")
	e.wantOK(status, body, `{"channels":{"presence-a":{"subscription_count":2},"presence-b":{"subscription_count":1},
		"private-x":{"subscription_count":1},"public-y":{"subscription_count":2}}}`)
	status, body = e.call("GET", "/apps/1/channels", q("filter_by_prefix", "private-"), "")
	e.wantOK(status, body, `{"channels":{"private-x":{}}}`)
	status, body = e.call("GET", "/apps/1/channels", q("filter_by_prefix", "nothing-"), "")
	e.wantOK(status, body, `{"channels":{}}`)
	// Another app's channels are its own.
	status, body = e.do("GET", e.signedURL(e.app2, "GET", "/apps/2/channels", nil, "", time.Now()), "")
	e.wantOK(status, body, `{"channels":{}}`)

	for _, bad := range []url.Values{
		q("info", "user_count"),
		q("filter_by_prefix", "private-", "info", "user_count"),
		q("info", "bogus"),
	} {
		status, body := e.call("GET", "/apps/1/channels", bad, "")
		wantError(t, status, body, http.StatusBadRequest)
	}
}

func TestGetChannel(t *testing.T) {
	e := newEnv(t)
	occupy(e)
	info := func(v string) url.Values { return url.Values{"info": {v}} }
	status, body := e.call("GET", "/apps/1/channels/presence-a", info("user_count,subscription_count"), "")
	e.wantOK(status, body, `{"occupied":true,"subscription_count":2,"user_count":2}`)
	status, body = e.call("GET", "/apps/1/channels/public-y", info("subscription_count"), "")
	e.wantOK(status, body, `{"occupied":true,"subscription_count":2}`)
	status, body = e.call("GET", "/apps/1/channels/public-y", nil, "")
	e.wantOK(status, body, `{"occupied":true}`)
	status, body = e.call("GET", "/apps/1/channels/empty-room", nil, "")
	e.wantOK(status, body, `{"occupied":false}`)
	status, body = e.call("GET", "/apps/1/channels/public-y", info("user_count"), "")
	wantError(t, status, body, http.StatusBadRequest)
}

func TestGetUsers(t *testing.T) {
	e := newEnv(t)
	occupy(e)
	e.member("presence-a", "u1") // a second connection of u1 is still one user
	status, body := e.call("GET", "/apps/1/channels/presence-a/users", nil, "")
	e.wantOK(status, body, `{"users":[{"id":"u1"},{"id":"u2"}]}`)
	status, body = e.call("GET", "/apps/1/channels/presence-nobody/users", nil, "")
	e.wantOK(status, body, `{"users":[]}`)
	for _, ch := range []string{"public-y", "private-x"} {
		status, body = e.call("GET", "/apps/1/channels/"+ch+"/users", nil, "")
		wantError(t, status, body, http.StatusBadRequest)
	}
}

// signin signs cl in as userID.
func signin(e *env, cl *wstest.Client, sid, userID string) {
	e.t.Helper()
	userData := `{"id":"` + userID + `"}`
	auth := e.app.Key + ":" + pusher.Sign(e.app.Secret, sid+"::user::"+userData)
	if err := cl.WriteJSON(map[string]any{"event": "pusher:signin", "data": map[string]string{"auth": auth, "user_data": userData}}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := cl.Expect("pusher:signin_success", wait); err != nil {
		e.t.Fatal(err)
	}
}

func TestTerminateConnections(t *testing.T) {
	e := newEnv(t)
	alice1, sid := e.subscriber("room-a")
	signin(e, alice1, sid, "alice")
	alice2, sid := e.connect(e.app.Key)
	signin(e, alice2, sid, "alice")
	bob, sid := e.subscriber("room-a")
	signin(e, bob, sid, "bob")
	anon, _ := e.subscriber("room-a")

	status, body := e.call("POST", "/apps/1/users/alice/terminate_connections", nil, "")
	e.wantOK(status, body, `{}`)
	for _, cl := range []*wstest.Client{alice1, alice2} {
		code, err := cl.ExpectClose(wait)
		if err != nil {
			t.Fatal(err)
		}
		if code != 4009 {
			t.Fatalf("close code %d, want 4009", code)
		}
	}
	// The others stay connected and subscribed.
	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"still","channel":"room-a","data":"here"}`)
	e.wantOK(status, body, `{}`)
	expectEvent(t, bob, "still", "room-a", "here")
	expectEvent(t, anon, "still", "room-a", "here")

	// Nobody signed in as that user: nothing happens.
	status, body = e.call("POST", "/apps/1/users/nobody/terminate_connections", nil, "")
	e.wantOK(status, body, `{}`)
}

func TestHealthAndReady(t *testing.T) {
	e := newEnv(t)
	e.subscriber("room-a")
	e.subscriber("room-a", "room-b")
	e.connect(e.app2.Key)
	resp, err := http.Get(e.srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e.wantOK(resp.StatusCode, b, `{"status":"ok","connections":{"current":3,"max":100},"channels":2}`)
	resp, err = http.Get(e.srv.URL + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	e.wantOK(resp.StatusCode, b, `{"ready":true}`)
}

// BenchmarkPublishREST measures one signed POST /events through the whole handler: routing,
// body read, signature check, validation, encoding and handing the frame to the node.
func BenchmarkPublishREST(b *testing.B) {
	for _, subscribed := range []bool{false, true} {
		name := "no-subscribers"
		if subscribed {
			name = "one-subscriber"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b)
			if subscribed {
				cl, _ := e.subscriber("bench")
				go io.Copy(io.Discard, cl.Conn) // a fast reader; ends when the client closes
			}
			body := `{"name":"tick","channel":"bench","data":"{\"price\":101.25,\"size\":300}"}`
			target := e.signedURL(e.app, "POST", "/apps/1/events", nil, body, time.Now())
			target = strings.TrimPrefix(target, e.srv.URL)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				req := httptest.NewRequest("POST", target, strings.NewReader(body))
				w := httptest.NewRecorder()
				e.api.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			b.StopTimer()
			// The subscriber kept up: it was not closed as a slow consumer, which would leave
			// the rest of the run measuring a publish to no one.
			if n := e.node.Stats().SlowConsumers; n > 0 {
				b.Fatalf("%d slow consumers: the subscriber was dropped during the run", n)
			}
		})
	}
}
