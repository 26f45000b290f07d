package console

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestAuthRefusesWithout(t *testing.T) {
	_, srv, _, pub := newTestConsole(t, nil)
	goodCookie := newAuth(testToken).cookie
	cases := []struct {
		name, method, path, header, value string
	}{
		{"page, nothing", "GET", "/console", "", ""},
		{"page, wrong bearer", "GET", "/console", "Authorization", "Bearer wrong-token-0123456789"},
		{"page, bearer with a suffix", "GET", "/console", "Authorization", "Bearer " + testToken + "x"},
		{"page, token prefix", "GET", "/console", "Authorization", "Bearer " + testToken[:len(testToken)-1]},
		{"page, basic scheme", "GET", "/console", "Authorization", "Basic " + testToken},
		{"page, bare token", "GET", "/console", "Authorization", testToken},
		{"page, wrong cookie", "GET", "/console", "Cookie", cookieName + "=" + strings.Repeat("0", len(goodCookie))},
		{"page, the token as cookie", "GET", "/console", "Cookie", cookieName + "=" + testToken},
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
			req.AddCookie(&http.Cookie{Name: cookieName, Value: goodCookie})
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

func TestAuthCookieFlow(t *testing.T) {
	_, srv, _, _ := newTestConsole(t, nil)
	resp, err := noRedirect.Get(srv.URL + "/console?app=a2&token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console?app=a2" {
		t.Fatalf("with the token: %d to %q; want 303 to /console?app=a2 (the token dropped, the rest kept)", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v; want one", cookies)
	}
	ck := cookies[0]
	if ck.Name != cookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" {
		t.Errorf("cookie %+v; want %s, HttpOnly, SameSite=Strict, Path=/console", ck, cookieName)
	}
	if strings.Contains(ck.Value, testToken) || ck.Value == "" {
		t.Errorf("cookie value %q holds the token (or nothing)", ck.Value)
	}

	// A browser: the jar keeps the cookie and follows the redirect to the page.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err = browser.Get(srv.URL + "/console?token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" || !strings.Contains(string(body), "<title>herald console</title>") {
		t.Fatalf("page after the redirect: %d at %s", resp.StatusCode, resp.Request.URL)
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
