package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
	"github.com/herald-rt/herald/session"
)

// The tests run a real session server behind the real API on a loopback HTTP server, subscribe real
// WebSocket clients, and sign REST calls as Pusher's server libraries do.

const (
	// wait is how long a test waits for anything that normally takes milliseconds: a frame, a
	// close, a shutdown. Tests run on busy machines (two cores shared with other builds, -race),
	// so it is generous; a passing test never waits it out.
	wait    = 30 * time.Second
	maxConn = 100
)

type env struct {
	t    testing.TB
	app  *herald.App // id "1": small limits, user authentication on
	app2 *herald.App // id "2": default limits
	node *session.Server
	api  *httpapi.Server
	srv  *httptest.Server
	addr string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	apps := herald.NewStaticApps([]herald.App{
		{ID: "1", Key: "key-one", Secret: "secret-one", EnableUserAuthentication: true,
			Limits: herald.Limits{MaxEventPayloadBytes: 1000, MaxBatchSize: 3}},
		{ID: "2", Key: "key-two", Secret: "secret-two"},
	})
	h, err := session.New(session.Config{Workers: 2, MaxConnections: maxConn}, apps, cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	health := func() httpapi.HealthReport {
		st := h.Stats()
		status := "ok"
		if st.Draining {
			status = "draining"
		}
		return httpapi.HealthReport{Status: status, Connections: httpapi.Capacity{Current: st.Connections, Max: st.MaxConnections}, Channels: st.Channels, Version: "v1.2.3"}
	}
	e := &env{t: t, node: h}
	e.app, _ = apps.AppByID("1")
	e.app2, _ = apps.AppByID("2")
	e.api = httpapi.New(httpapi.Config{MaxBodyBytes: 64 << 10}, apps, h, health, nil, nil)
	e.srv = httptest.NewServer(e.api)
	e.addr = strings.TrimPrefix(e.srv.URL, "http://")
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	return e
}

// signedURL returns the URL of a request signed for app at now.
func (e *env) signedURL(app *herald.App, method, path string, extra url.Values, body string, now time.Time) string {
	q := pusher.SignRequest(app, method, path, extra, []byte(body), now)
	return e.srv.URL + path + "?" + q.Encode()
}

// do sends a request and returns its status and body; every answer must be JSON.
func (e *env) do(method, rawURL, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	return e.send(req)
}

// send sends req and returns its status and body, which must be JSON.
func (e *env) send(req *http.Request) (int, []byte) {
	e.t.Helper()
	method, rawURL := req.Method, req.URL.String()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("%s %s: Content-Type %q, body %s", method, rawURL, ct, b)
	}
	return resp.StatusCode, b
}

// call signs a request for app 1 (now) and sends it.
func (e *env) call(method, path string, extra url.Values, body string) (int, []byte) {
	e.t.Helper()
	return e.do(method, e.signedURL(e.app, method, path, extra, body, time.Now()), body)
}

// wantOK checks a 200 whose body decodes to exactly want (compared as JSON values).
func (e *env) wantOK(status int, body []byte, want string) {
	e.t.Helper()
	if status != http.StatusOK {
		e.t.Fatalf("status %d, body %s; want 200", status, body)
	}
	wantJSON(e.t, body, want)
}

func wantJSON(t testing.TB, body []byte, want string) {
	t.Helper()
	var got, exp any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	g, _ := json.Marshal(got) // maps marshal with sorted keys
	x, _ := json.Marshal(exp)
	if string(g) != string(x) {
		t.Fatalf("body %s\nwant %s", g, x)
	}
}

// wantError checks an error answer: the status, and a body of exactly {"error": message,
// "code": status}.
func wantError(t testing.TB, status int, body []byte, want int) string {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, body %s; want %d", status, body, want)
	}
	var e map[string]any
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	msg, ok := e["error"].(string)
	if len(e) != 2 || !ok || msg == "" || e["code"] != float64(want) {
		t.Fatalf("error body %s; want {\"error\": message, \"code\": %d}", body, want)
	}
	return msg
}

// connect opens a WebSocket for the app key and returns it with its socket id.
func (e *env) connect(key string) (*wstest.Client, string) {
	e.t.Helper()
	cl, err := wstest.Dial(e.addr, "/app/"+key+"?protocol=7&client=js&version=8.4.0")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cl.Close() })
	sid, err := cl.SocketID(wait)
	if err != nil {
		e.t.Fatal(err)
	}
	return cl, sid
}

// subscribe joins channel (signing for private and presence channels of app 1) and waits
// for the subscription to succeed.
func (e *env) subscribe(cl *wstest.Client, sid, channel, channelData string) {
	e.t.Helper()
	auth := ""
	switch herald.Classify(channel).Kind {
	case herald.Private:
		auth = e.app.Key + ":" + pusher.Sign(e.app.Secret, sid+":"+channel)
	case herald.Presence:
		auth = e.app.Key + ":" + pusher.Sign(e.app.Secret, sid+":"+channel+":"+channelData)
	}
	if err := cl.Subscribe(channel, auth, channelData); err != nil {
		e.t.Fatal(err)
	}
	m, err := cl.Expect("pusher_internal:subscription_succeeded", wait)
	if err != nil {
		e.t.Fatal(err)
	}
	if m.Channel != channel {
		e.t.Fatalf("subscription_succeeded for %q, want %q", m.Channel, channel)
	}
}

// subscriber connects to app 1 and subscribes to channels.
func (e *env) subscriber(channels ...string) (*wstest.Client, string) {
	e.t.Helper()
	cl, sid := e.connect(e.app.Key)
	for _, ch := range channels {
		e.subscribe(cl, sid, ch, "")
	}
	return cl, sid
}

// member connects to app 1 and joins a presence channel as userID.
func (e *env) member(channel, userID string) *wstest.Client {
	e.t.Helper()
	cl, sid := e.connect(e.app.Key)
	e.subscribe(cl, sid, channel, `{"user_id":"`+userID+`","user_info":{"name":"`+userID+`"}}`)
	return cl
}

// expectEvent reads the next event other than presence notices and checks it exactly.
func expectEvent(t testing.TB, cl *wstest.Client, event, channel, data string) {
	t.Helper()
	for {
		m, err := cl.Read(wait)
		if err != nil {
			t.Fatalf("waiting for %s on %s: %v", event, channel, err)
		}
		if m.Close != 0 {
			t.Fatalf("waiting for %s on %s: closed with %d", event, channel, m.Close)
		}
		if strings.HasPrefix(m.Event, "pusher_internal:member_") {
			continue
		}
		if m.Event != event || m.Channel != channel || m.DataString() != data {
			t.Fatalf("got event %q channel %q data %q; want %q %q %q", m.Event, m.Channel, m.DataString(), event, channel, data)
		}
		return
	}
}

// eventBody encodes a POST /events body.
func eventBody(t testing.TB, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
