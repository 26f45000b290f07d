package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/appstore"
)

// fakeAdmin is an app store the apps API writes to.
type fakeAdmin struct {
	mu   sync.Mutex
	apps map[string]herald.App
}

func (f *fakeAdmin) Apps() []*herald.App {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*herald.App
	for _, a := range f.apps {
		out = append(out, &a)
	}
	return out
}

func (f *fakeAdmin) App(id string) (*herald.App, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.apps[id]
	return &a, ok
}

func (f *fakeAdmin) Writable() (bool, string) { return true, "" }

func (f *fakeAdmin) Create(_ context.Context, a herald.App) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.apps[a.ID]; ok {
		return appstore.ErrExists
	}
	f.apps[a.ID] = a
	return nil
}

func (f *fakeAdmin) Update(_ context.Context, a herald.App) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.apps[a.ID]; !ok {
		return appstore.ErrNotFound
	}
	f.apps[a.ID] = a
	return nil
}

func (f *fakeAdmin) disabled(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apps[id].Disabled
}

// newAdminConsole runs a console whose apps API writes to a fakeAdmin holding app a1, and
// returns a session id for a logged-in browser.
func newAdminConsole(t *testing.T) (*httptest.Server, *fakeAdmin, string) {
	t.Helper()
	admin := &fakeAdmin{apps: map[string]herald.App{"a1": {ID: "a1", Key: "k1", Secret: "s1"}}}
	c, srv, _, _ := newTestConsole(t, func(cfg *Config) { cfg.Admin = admin })
	session, _ := c.auth.sessions.start()
	return srv, admin, session
}

// send makes a request with the headers given (a value "" leaves the header out) and returns
// the status and the decoded JSON body, which every answer here must be.
func send(t *testing.T, method, u, body string, header map[string]string) (int, map[string]any, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode != http.StatusSeeOther {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s answered %d with no JSON object: %q", method, u, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, out, resp
}

// TestCrossOriginRefused: a logged-in browser's request that changes something is refused
// with 403 and a JSON error naming why when a page of another origin sent it (Sec-Fetch-Site
// cross-site or same-site; without Sec-Fetch-Site, an Origin that is not the console's host),
// and the app stays as it was; the same request from the console's own page (same-origin, or
// an Origin naming its host) and from a tool that sends neither header goes through. A
// cross-site login or logout is refused too; GET requests are not concerned.
func TestCrossOriginRefused(t *testing.T) {
	srv, admin, session := newAdminConsole(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	disable := srv.URL + "/console/api/apps/a1/disable"
	enable := srv.URL + "/console/api/apps/a1/enable"
	browser := func(extra map[string]string) map[string]string {
		h := map[string]string{"Cookie": cookieName + "=" + session, "Content-Type": "application/json"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
		why    string
	}{
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, "Sec-Fetch-Site: cross-site"},
		{"same-site, another port", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:6001"}, "Sec-Fetch-Site: same-site"},
		{"old browser, another origin", map[string]string{"Origin": "https://evil.example"}, "Origin https://evil.example is not this console's host"},
		{"old browser, the null origin", map[string]string{"Origin": "null"}, "Origin null is not this console's host"},
	} {
		code, body, _ := send(t, "POST", disable, "", browser(tc.header))
		if code != http.StatusForbidden || body["code"] != float64(403) || !strings.Contains(body["error"].(string), tc.why) {
			t.Errorf("%s: %d %v; want 403 with an error naming %q", tc.name, code, body, tc.why)
		}
		if admin.disabled("a1") {
			t.Fatalf("%s: the refused request disabled the app", tc.name)
		}
	}
	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"the console's page", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": srv.URL}},
		{"typed by the user", map[string]string{"Sec-Fetch-Site": "none"}},
		{"old browser, its own origin", map[string]string{"Origin": "http://" + host}},
		{"a tool without either header", nil},
	} {
		code, body, _ := send(t, "POST", disable, "", browser(tc.header))
		if code != http.StatusOK || !admin.disabled("a1") {
			t.Errorf("%s: %d %v; want 200 and the app disabled", tc.name, code, body)
		}
		if code, body, _ := send(t, "POST", enable, "", browser(tc.header)); code != http.StatusOK {
			t.Fatalf("%s: enable: %d %v", tc.name, code, body)
		}
	}
	// A bearer's tool without browser headers.
	if code, body, _ := send(t, "POST", disable, "", map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}); code != http.StatusOK {
		t.Errorf("bearer: %d %v", code, body)
	}

	// Login: a page elsewhere cannot log the browser in (with a token of its choosing).
	form := url.Values{"token": {testToken}}.Encode()
	code, body, resp := send(t, "POST", srv.URL+"/console/login", form,
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
	if code != http.StatusForbidden || len(resp.Cookies()) > 0 || !strings.Contains(body["error"].(string), "cross-origin") {
		t.Errorf("cross-site login: %d %v, cookies %v; want 403 and no session", code, body, resp.Cookies())
	}
	code, _, resp = send(t, "POST", srv.URL+"/console/login", form,
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin", "Origin": srv.URL})
	if code != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Errorf("the login form's own post: %d, cookies %v; want 303 and a session", code, resp.Cookies())
	}
	// Logout: a page elsewhere cannot end the session.
	if code, _, _ := send(t, "POST", srv.URL+"/console/logout", "", browser(map[string]string{"Sec-Fetch-Site": "cross-site"})); code != http.StatusForbidden {
		t.Errorf("cross-site logout: %d; want 403", code)
	}
	if code, _, _ := send(t, "GET", srv.URL+"/console/api/apps", "", browser(map[string]string{"Sec-Fetch-Site": "cross-site"})); code != http.StatusOK {
		t.Errorf("a cross-site GET (which changes nothing, and CORS keeps its answer from the page): %d; want 200", code)
	}
}

// TestAppsAPINeedsJSON: every write of the apps API declares application/json, a body or
// none: without a Content-Type, or with a form's or text's, it is refused with 415 and a JSON
// error, and nothing changes.
func TestAppsAPINeedsJSON(t *testing.T) {
	srv, admin, session := newAdminConsole(t)
	cookie := cookieName + "=" + session
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/console/api/apps/a1/disable", ""},
		{"POST", "/console/api/apps/a1/rotate-secret", ""},
		{"POST", "/console/api/apps/a1/enable", ""},
		{"POST", "/console/api/apps", `{"id":"a2"}`},
		{"PATCH", "/console/api/apps/a1", `{"id":"a1","key":"k1","enabled":false}`},
	} {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
			code, body, _ := send(t, tc.method, srv.URL+tc.path, tc.body, map[string]string{"Cookie": cookie, "Content-Type": ct})
			if code != http.StatusUnsupportedMediaType || body["code"] != float64(415) || !strings.Contains(body["error"].(string), "application/json") {
				t.Errorf("%s %s as %q: %d %v; want 415 asking for application/json", tc.method, tc.path, ct, code, body)
			}
		}
	}
	admin.mu.Lock()
	a1, n := admin.apps["a1"], len(admin.apps)
	admin.mu.Unlock()
	if a1.Disabled || a1.Secret != "s1" || n != 1 {
		t.Fatalf("refused writes changed the apps: %+v, %d apps", a1, n)
	}
	if code, body, _ := send(t, "POST", srv.URL+"/console/api/apps/a1/rotate-secret", "", map[string]string{"Cookie": cookie, "Content-Type": "application/json; charset=utf-8"}); code != http.StatusOK || body["secret"] == "s1" {
		t.Errorf("rotate-secret as JSON without a body: %d %v; want 200 and a new secret", code, body)
	}
	if code, body, _ := send(t, "POST", srv.URL+"/console/api/apps", `{"id":"a2"}`, map[string]string{"Cookie": cookie, "Content-Type": "application/json"}); code != http.StatusCreated {
		t.Errorf("create as JSON: %d %v", code, body)
	}
}

// TestCookieSecureOverTLS: the session cookie is Secure whenever the browser reached the
// console over TLS: on a TLS listener, or behind a proxy that terminates it (X-Forwarded-Proto,
// Forwarded, or the login page's https origin); over plain HTTP it is not (the browser would
// not send it back).
func TestCookieSecureOverTLS(t *testing.T) {
	c := New(Config{Token: testToken, Node: "n1", Apps: []string{"a1"}, Source: &fakeSource{sample: Sample{Refused: map[string]int64{}}}}, nil)
	t.Cleanup(c.Close)
	tlsSrv := httptest.NewTLSServer(c)
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(c)
	t.Cleanup(plain.Close)
	client := tlsSrv.Client()
	client.CheckRedirect = noRedirect.CheckRedirect
	login := func(client *http.Client, base string, header map[string]string) *http.Cookie {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/console/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(resp.Cookies()) != 1 {
			t.Fatalf("login %v: %d, cookies %v", header, resp.StatusCode, resp.Cookies())
		}
		return resp.Cookies()[0]
	}
	if ck := login(client, tlsSrv.URL, nil); !ck.Secure {
		t.Errorf("over TLS: cookie %+v; want Secure", ck)
	}
	for _, h := range []map[string]string{
		{"X-Forwarded-Proto": "https"},
		{"Forwarded": `for=192.0.2.60;proto=https;by=203.0.113.43`},
		{"Origin": "https://console.example", "Sec-Fetch-Site": "same-origin"},
	} {
		if ck := login(noRedirect, plain.URL, h); !ck.Secure {
			t.Errorf("behind a TLS proxy (%v): cookie %+v; want Secure", h, ck)
		}
	}
	if ck := login(noRedirect, plain.URL, map[string]string{"Origin": plain.URL}); ck.Secure {
		t.Errorf("over plain HTTP: cookie %+v; want it without Secure", ck)
	}
}
