package console

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestAuthRefusesWithout(t *testing.T) {
	c, srv, _, pub := newTestConsole(t, nil)
	goodSession, _ := c.auth.sessions.start()
	cases := []struct {
		name, method, path, header, value string
	}{
		{"page, nothing", "GET", "/console", "", ""},
		{"page, wrong bearer", "GET", "/console", "Authorization", "Bearer wrong-token-0123456789"},
		{"page, bearer with a suffix", "GET", "/console", "Authorization", "Bearer " + testToken + "x"},
		{"page, token prefix", "GET", "/console", "Authorization", "Bearer " + testToken[:len(testToken)-1]},
		{"page, basic scheme", "GET", "/console", "Authorization", "Basic " + testToken},
		{"page, bare token", "GET", "/console", "Authorization", testToken},
		{"page, wrong cookie", "GET", "/console", "Cookie", cookieName + "=" + strings.Repeat("0", len(goodSession))},
		{"page, the token as cookie", "GET", "/console", "Cookie", cookieName + "=" + testToken},
		{"page, the token in the URL", "GET", "/console?token=" + testToken, "", ""},
		{"page, wrong token in URL", "GET", "/console?token=wrong-token-0123456789", "", ""},
		{"page, empty token in URL", "GET", "/console?token=", "", ""},
		{"page, good cookie but wrong bearer", "GET", "/console", "Authorization", "Bearer nope"},
		{"stream, nothing", "GET", "/console/stream?app=a1", "", ""},
		{"stream, token in URL", "GET", "/console/stream?app=a1&token=" + testToken, "", ""},
		{"creator, nothing", "POST", "/console/apps/a1/events", "", ""},
		{"creator, wrong bearer", "POST", "/console/apps/a1/events", "Authorization", "Bearer wrong"},
		{"unknown route, nothing", "GET", "/console/secret", "", ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(`{"name":"e","channel":"c","data":"d"}`))
		req.Header.Set("Content-Type", "application/json")
		if c.header != "" {
			req.Header.Set(c.header, c.value)
		}
		if c.name == "page, good cookie but wrong bearer" {
			req.AddCookie(&http.Cookie{Name: cookieName, Value: goodSession})
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d %s; want 401", c.name, resp.StatusCode, body)
			continue
		}
		if len(resp.Cookies()) > 0 {
			t.Errorf("%s: refused but set a cookie", c.name)
		}
		if strings.Contains(string(body), "<html") || !strings.Contains(string(body), `"code":401`) {
			t.Errorf("%s: body %s; want the JSON error, not the page", c.name, body)
		}
	}
	if n := pub.count(); n != 0 {
		t.Errorf("the event creator ran %d times for refused requests", n)
	}
}

// postLogin posts the login form with client.
func postLogin(t *testing.T, client *http.Client, base, token, app string) *http.Response {
	t.Helper()
	resp, err := client.PostForm(base+"/console/login", url.Values{"token": {token}, "app": {app}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAuthLoginFlow: a browser is sent from the page to the login form; the form posts the
// token in its body (never a URL); a wrong token gets the form again with an error and no
// cookie; the right one a random session id in an HttpOnly, SameSite=Strict cookie with a
// Max-Age, and a redirect to the page with the app kept. The session opens the page, the
// stream and the event creator; a token in a URL opens nothing, not even with ?token= on
// the page's address.
func TestAuthLoginFlow(t *testing.T) {
	_, srv, _, _ := newTestConsole(t, nil)
	req, _ := http.NewRequest("GET", srv.URL+"/console?app=a2&token="+testToken, nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login?app=a2" || len(resp.Cookies()) > 0 {
		t.Fatalf("a browser with the token in the URL: %d to %q, cookies %v; want 303 to the login form, no session",
			resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	resp, err = http.Get(srv.URL + "/console/login?app=a2")
	if err != nil {
		t.Fatal(err)
	}
	form, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(form), `<form method="post" action="/console/login">`) ||
		!strings.Contains(string(form), `type="password"`) || !strings.Contains(string(form), `value="a2"`) {
		t.Fatalf("login form: %d %s", resp.StatusCode, form)
	}

	resp = postLogin(t, noRedirect, srv.URL, "wrong-token-0123456789", "a2")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) > 0 || !strings.Contains(string(body), "not the console token") {
		t.Fatalf("wrong token: %d, cookies %v, %s", resp.StatusCode, resp.Cookies(), body)
	}

	resp = postLogin(t, noRedirect, srv.URL, testToken, "a2")
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console?app=a2" {
		t.Fatalf("login: %d to %q; want 303 to /console?app=a2", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v; want one", cookies)
	}
	ck := cookies[0]
	if ck.Name != cookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" ||
		ck.MaxAge <= 0 || ck.MaxAge > int(DefaultSessionLifetime.Seconds()) {
		t.Errorf("cookie %+v; want %s, HttpOnly, SameSite=Strict, Path=/console, Max-Age the lifetime", ck, cookieName)
	}
	if strings.Contains(ck.Value, testToken) || len(ck.Value) != 64 {
		t.Errorf("cookie value %q: want a random 32-byte id, nothing of the token", ck.Value)
	}
	resp = postLogin(t, noRedirect, srv.URL, testToken, "")
	resp.Body.Close()
	if again := resp.Cookies(); len(again) != 1 || again[0].Value == ck.Value {
		t.Errorf("a second login got the same session id %q: ids must be random", ck.Value)
	}

	// A browser: the jar keeps the cookie and follows the redirect to the page.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp = postLogin(t, browser, srv.URL, testToken, "")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" || !strings.Contains(string(body), "<title>herald console</title>") {
		t.Fatalf("page after the login: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("page CSP %q: want default-src 'self' (nothing from elsewhere)", csp)
	}
	for _, ref := range []string{"http://", "https://", "//cdn"} {
		if strings.Contains(string(body), ref) {
			t.Errorf("page refers to %q: it must be self-contained", ref)
		}
	}
	// The cookie opens the stream and the event creator too.
	resp, err = browser.Get(srv.URL + "/console/stream")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream with the cookie: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, err = browser.Post(srv.URL+"/console/apps/a1/events", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("event creator with the cookie: %d", resp.StatusCode)
	}
	// The login form takes a form only.
	resp, err = http.Post(srv.URL+"/console/login", "application/json", strings.NewReader(`{"token":"`+testToken+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType || len(resp.Cookies()) > 0 {
		t.Errorf("login as JSON: %d; want 415", resp.StatusCode)
	}
}

// TestAuthSessionsExpire: a session ends on the server when its lifetime is over, whatever
// the browser keeps, and at logout; sessions are bounded in number.
func TestAuthSessionsExpire(t *testing.T) {
	c, srv, _, _ := newTestConsole(t, func(cfg *Config) { cfg.SessionLifetime = time.Hour })
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	c.auth.sessions.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	status := func(id string) int {
		req, _ := http.NewRequest("GET", srv.URL+"/console", nil)
		req.AddCookie(&http.Cookie{Name: cookieName, Value: id})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	resp := postLogin(t, noRedirect, srv.URL, testToken, "")
	resp.Body.Close()
	ck := resp.Cookies()[0]
	if ck.MaxAge != 3600 {
		t.Errorf("Max-Age %d; want the configured hour", ck.MaxAge)
	}
	if s := status(ck.Value); s != http.StatusOK {
		t.Fatalf("a fresh session: %d", s)
	}
	advance(time.Hour - time.Second)
	if s := status(ck.Value); s != http.StatusOK {
		t.Fatalf("a session a second before its end: %d", s)
	}
	advance(time.Second)
	if s := status(ck.Value); s != http.StatusUnauthorized {
		t.Fatalf("an expired session: %d; want 401", s)
	}
	if n := c.auth.sessions.count(); n != 0 {
		t.Errorf("%d sessions kept after the only one expired", n)
	}

	// Logout ends the session at once, and clears the cookie.
	resp = postLogin(t, noRedirect, srv.URL, testToken, "")
	resp.Body.Close()
	id := resp.Cookies()[0].Value
	req, _ := http.NewRequest("POST", srv.URL+"/console/logout", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: id})
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("logout: %d, cookies %v; want 303 and the cookie cleared", resp.StatusCode, resp.Cookies())
	}
	if s := status(id); s != http.StatusUnauthorized {
		t.Fatalf("a session after logout: %d; want 401", s)
	}

	// At most maxSessions: the oldest goes first.
	var ids []string
	for i := 0; i < maxSessions+1; i++ {
		id, _ := c.auth.sessions.start()
		ids = append(ids, id)
		advance(time.Millisecond)
	}
	if n := c.auth.sessions.count(); n != maxSessions {
		t.Fatalf("%d sessions kept; want at most %d", n, maxSessions)
	}
	if status(ids[0]) != http.StatusUnauthorized || status(ids[maxSessions]) != http.StatusOK {
		t.Error("past the bound, the session closest to its end was not the one forgotten")
	}
}

func TestAuthBearer(t *testing.T) {
	_, srv, _, pub := newTestConsole(t, nil)
	for _, h := range []string{"Bearer " + testToken, "bearer " + testToken} {
		req, _ := http.NewRequest("GET", srv.URL+"/console", nil)
		req.Header.Set("Authorization", h)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%q: %d %s; want the page", h, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	// The event creator takes JSON only: a form from elsewhere cannot post to it.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		req, _ := http.NewRequest("POST", srv.URL+"/console/apps/a1/events", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: %d; want 415", ct, resp.StatusCode)
		}
	}
	if n := pub.count(); n != 0 {
		t.Errorf("the event creator ran %d times for non-JSON requests", n)
	}
}
