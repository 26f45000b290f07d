package console

import (
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// loginPage is the login form. It posts the token in the request's body, never in a URL.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>herald console: log in</title>
<style>
body { font: 15px system-ui, sans-serif; margin: 0; display: grid; place-items: center; min-height: 100vh; background: #f5f6f8; color: #1c1f24; }
form { background: #fff; padding: 24px 28px; border-radius: 8px; box-shadow: 0 1px 4px #0002; min-width: 320px; }
h1 { font-size: 18px; margin: 0 0 16px; }
label { display: block; margin-bottom: 6px; }
input[type=password] { width: 100%; box-sizing: border-box; padding: 8px; font: inherit; margin-bottom: 14px; }
button { padding: 8px 16px; font: inherit; }
.bad { color: #b3261e; margin: 0 0 12px; }
</style>
</head>
<body>
<form method="post" action="/console/login">
<h1>herald console</h1>
{{if .Error}}<p class="bad" id="login-error">{{.Error}}</p>{{end}}
<label for="token">Console token</label>
<input type="password" id="token" name="token" autocomplete="current-password" autofocus required>
<input type="hidden" name="app" value="{{.App}}">
<button type="submit" id="login">Log in</button>
</form>
</body>
</html>
`))

// loginForm serves the login form (GET /console/login).
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, http.StatusOK, r.URL.Query().Get("app"), "")
}

func (c *Console) showLogin(w http.ResponseWriter, status int, app, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct{ App, Error string }{app, msg})
}

// login checks the token posted by the form, starts a session and sends the browser to the
// page (POST /console/login, application/x-www-form-urlencoded: token, and app to open).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"error": "console: post the login form (application/x-www-form-urlencoded)", "code": http.StatusUnsupportedMediaType})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "console: bad login form", "code": http.StatusBadRequest})
		return
	}
	app := r.PostForm.Get("app")
	if !c.auth.tokenOK(r.PostForm.Get("token")) {
		c.showLogin(w, http.StatusUnauthorized, app, "That is not the console token.")
		return
	}
	id, _ := c.auth.sessions.start()
	setCookie(w, r, id, int(c.auth.sessions.lifetime.Seconds()))
	to := "/console"
	if app != "" {
		to += "?app=" + url.QueryEscape(app)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// logout ends the request's session and sends the browser to the login form (POST
// /console/logout).
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.auth.sessions.end(ck.Value)
	}
	setCookie(w, r, "", -1)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// wantsHTML reports whether r is a browser's navigation (it accepts HTML), which is sent to
// the login form rather than answered with a JSON 401.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}
