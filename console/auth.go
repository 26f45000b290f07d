package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"
)

// cookieName is the console's session cookie, set by POST /console/login.
const cookieName = "herald_console"

// DefaultSessionLifetime is how long a console session lasts when Config.SessionLifetime is
// zero.
const DefaultSessionLifetime = 12 * time.Hour

// maxSessions bounds the sessions kept: past it, logging in again forgets the session closest
// to its end. A console has a few operators, not thousands.
const maxSessions = 64

// auth checks the console's token and its sessions: a browser's session cookie (from the
// login form), or a tool's Authorization: Bearer header. The token is never accepted in a
// URL, where it would stay in the browser's history and the access logs. Safe for concurrent
// use.
type auth struct {
	token    []byte // sha256 of the token: compared in constant time, whatever its length
	sessions *sessions
}

// sessions are the logged-in browsers: random ids, each valid until its end, kept on the
// server (so a session ends when it expires, at logout, or when the node restarts, whatever
// the browser keeps). The map is keyed by the id's hash, so a lookup's timing tells nothing
// of the ids.
type sessions struct {
	lifetime time.Duration
	now      func() time.Time
	mu       sync.Mutex
	byHash   map[[32]byte]time.Time // sha256 of the id -> when it ends
}

func newAuth(token string) auth {
	sum := sha256.Sum256([]byte(token))
	return auth{token: sum[:], sessions: &sessions{lifetime: DefaultSessionLifetime, now: time.Now, byHash: map[[32]byte]time.Time{}}}
}

// tokenOK reports whether t is the token, in time independent of where they differ.
func (a auth) tokenOK(t string) bool {
	sum := sha256.Sum256([]byte(t))
	return subtle.ConstantTimeCompare(sum[:], a.token) == 1
}

// allowed reports whether r carries a live session's cookie or the token as a bearer.
func (a auth) allowed(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && a.tokenOK(strings.TrimSpace(t))
	}
	c, err := r.Cookie(cookieName)
	return err == nil && a.sessions.live(c.Value)
}

// live reports whether id is a session that has not ended.
func (s *sessions) live(id string) bool {
	if id == "" {
		return false
	}
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	end, ok := s.byHash[h]
	if ok && !s.now().Before(end) {
		delete(s.byHash, h)
		return false
	}
	return ok
}

// start makes a session and returns its id and end.
func (s *sessions) start() (string, time.Time) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	now := s.now()
	end := now.Add(s.lifetime)
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, e := range s.byHash {
		if !now.Before(e) {
			delete(s.byHash, h)
		}
	}
	for len(s.byHash) >= maxSessions {
		var first [32]byte
		var soonest time.Time
		for h, e := range s.byHash {
			if soonest.IsZero() || e.Before(soonest) {
				first, soonest = h, e
			}
		}
		delete(s.byHash, first)
	}
	s.byHash[sha256.Sum256([]byte(id))] = end
	return id, end
}

// end forgets the session id (logout).
func (s *sessions) end(id string) {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	delete(s.byHash, h)
	s.mu.Unlock()
}

// count is how many sessions are kept (tests).
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byHash)
}

// setCookie gives the browser its session: HttpOnly (no script reads it), SameSite=Strict
// (no other site's page sends it, so no form elsewhere can publish through the console),
// Max-Age its lifetime, Secure whenever the browser reached the console over TLS, through a
// proxy that terminates it included (overTLS).
func setCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/console", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: maxAge, Secure: overTLS(r)})
}

// unauthorized answers 401 with a JSON error.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="herald console"`)
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "console: log in at /console/login or send Authorization: Bearer TOKEN", "code": http.StatusUnauthorized})
}
