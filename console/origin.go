package console

import (
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// Requests that change something (every method but GET, HEAD and OPTIONS: logging in and out,
// publishing, the apps API's writes) are refused with 403 when a browser sent them from
// another origin: a page elsewhere cannot make an operator's browser disable an app or rotate
// its secret with the console's cookie. The browser says where a request comes from in
// Sec-Fetch-Site (every browser since 2023), else in Origin, which must then name this
// console's own host; a request with neither (curl, a script with the bearer token) is not a
// browser's cross-site request and passes. SameSite=Strict on the cookie and, for the apps
// API and the event creator, a JSON body (which no form elsewhere can send without a CORS
// preflight this listener never grants) close the same door twice more.

// crossOrigin is net/http's check of Sec-Fetch-Site and Origin against Host.
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin reports why r, a request that changes something, is refused as cross-origin, or
// "" when it may go on.
func sameOrigin(r *http.Request) string {
	if crossOrigin.Check(r) == nil {
		return ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return "console: refused a cross-origin request (Sec-Fetch-Site: " + site + "): the console changes nothing for a page of another origin"
	}
	return "console: refused a cross-origin request (Origin " + r.Header.Get("Origin") + " is not this console's host, " + r.Host +
		"): the console changes nothing for a page of another origin"
}

// jsonOnly serves next only a request whose body is declared application/json (415
// otherwise), even when it has no body (disable, enable, rotate-secret): a form of another
// site cannot send that type.
func jsonOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			got := r.Header.Get("Content-Type")
			if got == "" {
				got = "none"
			}
			apiError(w, http.StatusUnsupportedMediaType, "apps: send Content-Type: application/json (got %s), with an empty body or none where the request needs none", got)
			return
		}
		next(w, r)
	}
}

// overTLS reports whether the browser reached the console over TLS: the connection itself,
// or, behind a proxy that terminates TLS, the proxy's X-Forwarded-Proto or Forwarded header,
// or the page's own origin (a browser's POST carries it). The session cookie is then Secure.
func overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if p, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ","); strings.EqualFold(strings.TrimSpace(p), "https") {
		return true
	}
	for _, part := range strings.FieldsFunc(r.Header.Get("Forwarded"), func(c rune) bool { return c == ';' || c == ',' }) {
		if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
			return true
		}
	}
	if o, err := url.Parse(r.Header.Get("Origin")); err == nil && o.Scheme == "https" {
		return true
	}
	return false
}
