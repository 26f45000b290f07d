package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// cookieName is the console's session cookie, set by /console?token=...
const cookieName = "herald_console"

// auth checks the console's token: a browser's cookie, a tool's Authorization: Bearer
// header, or (on GET /console only, see page) ?token= in the URL.
type auth struct {
	token  []byte // sha256 of the token: compared in constant time, whatever its length
	cookie string // the cookie's value: an HMAC of the token, so the cookie never holds it
}

func newAuth(token string) auth {
	sum := sha256.Sum256([]byte(token))
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("herald console session"))
	return auth{token: sum[:], cookie: hex.EncodeToString(mac.Sum(nil))}
}

// tokenOK reports whether t is the token, in time independent of where they differ.
func (a auth) tokenOK(t string) bool {
	sum := sha256.Sum256([]byte(t))
	return subtle.ConstantTimeCompare(sum[:], a.token) == 1
}

// allowed reports whether r carries the session cookie or the token as a bearer.
func (a auth) allowed(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && a.tokenOK(strings.TrimSpace(t))
	}
	c, err := r.Cookie(cookieName)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.cookie)) == 1
}

// setCookie gives the browser its session: HttpOnly (no script reads it), SameSite=Strict
// (no other site's page sends it, so no form elsewhere can publish through the console).
func (a auth) setCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: a.cookie, Path: "/console", HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
}

// unauthorized answers 401 with a JSON error.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="herald console"`)
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "console: open /console?token=TOKEN or send Authorization: Bearer TOKEN", "code": http.StatusUnauthorized})
}
