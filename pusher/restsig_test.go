package pusher

import (
	"crypto/md5"
	"encoding/hex"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// The worked example of Pusher's HTTP API reference ("Generating authentication signatures").
const (
	docsBody      = `{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}`
	docsBodyMD5   = "ec365a775a4cd0599faeb73354201b6f"
	docsSignature = "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c"
	docsTimestamp = 1353088179
)

var docsNow = time.Unix(docsTimestamp, 0)

func docsQuery() url.Values {
	return url.Values{
		"auth_key":       {docsApp.Key},
		"auth_timestamp": {strconv.Itoa(docsTimestamp)},
		"auth_version":   {"1.0"},
		"body_md5":       {docsBodyMD5},
		"auth_signature": {docsSignature},
	}
}

func TestVerifyRequestDocsExample(t *testing.T) {
	if got := hmacHex(docsApp.Secret, "POST\n/apps/3/events\nauth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0&body_md5="+docsBodyMD5); got != docsSignature {
		t.Fatalf("cross-check: crypto/hmac gives %s", got)
	}
	if err := VerifyRequest(docsApp, "POST", "/apps/3/events", docsQuery(), []byte(docsBody), docsNow, 0); err != nil {
		t.Fatalf("docs example refused: %v", err)
	}
	if err := VerifyRequest(docsApp, "post", "/apps/3/events", docsQuery(), []byte(docsBody), docsNow, 0); err != nil {
		t.Fatalf("lowercase method refused: %v", err)
	}
	q := SignRequest(docsApp, "POST", "/apps/3/events", nil, []byte(docsBody), docsNow)
	for k, want := range map[string]string{"auth_signature": docsSignature, "body_md5": docsBodyMD5, "auth_timestamp": "1353088179", "auth_version": "1.0", "auth_key": docsApp.Key} {
		if got := q.Get(k); got != want || len(q[k]) != 1 {
			t.Errorf("SignRequest %s = %q, want %q", k, q[k], want)
		}
	}
}

func TestVerifyRequestQueryParams(t *testing.T) {
	// GET /channels?filter_by_prefix=presence-&info=user_count, signed with Python's hmac.
	q := url.Values{
		"auth_key": {docsApp.Key}, "auth_timestamp": {"1353088179"}, "auth_version": {"1.0"},
		"filter_by_prefix": {"presence-"}, "info": {"user_count"},
		"auth_signature": {"16819168891cb5dfd72b5c7a5d3d602605b26c6ba1930033b5e2eeeb65010291"},
	}
	if err := VerifyRequest(docsApp, "GET", "/apps/3/channels", q, nil, docsNow, 0); err != nil {
		t.Fatalf("GET with params refused: %v", err)
	}
	// An upper-case key, signed lowercased (Pusher's docs) and as-is (pusher-http-node).
	for _, sig := range []string{
		"ef71a6170bd8d71dd901dd568fb1d1d606c0a38f826ed01009280fcec3580531", // ...&foo=bar
		"df7ef0a97c0337cab8a089d7fbbc72474ab2c85893f9c58ec52a258acbfd0740", // Foo=bar&...
	} {
		q := url.Values{"auth_key": {docsApp.Key}, "auth_timestamp": {"1353088179"}, "auth_version": {"1.0"}, "Foo": {"bar"}, "auth_signature": {sig}}
		if err := VerifyRequest(docsApp, "GET", "/apps/3/channels", q, nil, docsNow, 0); err != nil {
			t.Errorf("signature %s refused: %v", sig, err)
		}
	}
}

func TestVerifyRequestErrors(t *testing.T) {
	body := []byte(docsBody)
	tests := []struct {
		name   string
		app    *herald.App
		method string
		edit   func(url.Values)
		body   []byte
		now    time.Time
		window time.Duration
		msg    string
	}{
		{name: "nil app", app: nil, msg: "unknown app"},
		{name: "no auth_key", edit: func(q url.Values) { q.Del("auth_key") }, msg: "missing auth_key"},
		{name: "two auth_keys", edit: func(q url.Values) { q.Add("auth_key", docsApp.Key) }, msg: "duplicate auth_key"},
		{name: "wrong key", edit: func(q url.Values) { q.Set("auth_key", "nope") }, msg: "invalid auth_key"},
		{name: "no signature", edit: func(q url.Values) { q.Del("auth_signature") }, msg: "missing auth_signature"},
		{name: "no version", edit: func(q url.Values) { q.Del("auth_version") }, msg: "missing auth_version"},
		{name: "version 2", edit: func(q url.Values) { q.Set("auth_version", "2.0") }, msg: "unsupported auth_version"},
		{name: "no timestamp", edit: func(q url.Values) { q.Del("auth_timestamp") }, msg: "missing auth_timestamp"},
		{name: "bad timestamp", edit: func(q url.Values) { q.Set("auth_timestamp", "soon") }, msg: "invalid auth_timestamp"},
		{name: "expired", now: docsNow.Add(601 * time.Second), msg: "auth_timestamp expired"},
		{name: "future", now: docsNow.Add(-601 * time.Second), msg: "ahead of the server's time"},
		{name: "narrow window", now: docsNow.Add(11 * time.Second), window: 10 * time.Second, msg: "auth_timestamp expired"},
		{name: "no body_md5", edit: func(q url.Values) { q.Del("body_md5") }, msg: "missing body_md5"},
		{name: "two body_md5", edit: func(q url.Values) { q.Add("body_md5", docsBodyMD5) }, msg: "duplicate body_md5"},
		{name: "changed body", body: []byte(docsBody + " "), msg: "body_md5 mismatch"},
		{name: "md5 of nothing", body: []byte{}, msg: "body_md5 mismatch"},
		{name: "bad md5", edit: func(q url.Values) { q.Set("body_md5", "zz") }, msg: "body_md5 mismatch"},
		{name: "other method", method: "PUT", msg: "invalid signature"},
		{name: "extra param", edit: func(q url.Values) { q.Set("info", "x") }, msg: "invalid signature"},
		{name: "short signature", edit: func(q url.Values) { q.Set("auth_signature", docsSignature[:62]) }, msg: "invalid signature"},
		{name: "non-hex signature", edit: func(q url.Values) { q.Set("auth_signature", "g"+docsSignature[1:]) }, msg: "invalid signature"},
		{name: "other secret", app: &herald.App{Key: docsApp.Key, Secret: "x"}, msg: "invalid signature"},
	}
	for _, tt := range tests {
		q := docsQuery()
		if tt.edit != nil {
			tt.edit(q)
		}
		app, method, b, now := docsApp, "POST", body, docsNow
		if tt.name == "nil app" || tt.app != nil {
			app = tt.app
		}
		if tt.method != "" {
			method = tt.method
		}
		if tt.body != nil {
			b = tt.body
		}
		if !tt.now.IsZero() {
			now = tt.now
		}
		err := VerifyRequest(app, method, "/apps/3/events", q, b, now, tt.window)
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		t.Run(tt.name, func(t *testing.T) { wantErr(t, err, herald.CodeUnauthorized, tt.msg) })
	}
	// The window's edges are inside it.
	for _, now := range []time.Time{docsNow.Add(600 * time.Second), docsNow.Add(-600 * time.Second)} {
		if err := VerifyRequest(docsApp, "POST", "/apps/3/events", docsQuery(), body, now, 0); err != nil {
			t.Errorf("now %v: %v", now, err)
		}
	}
}

func TestSignRequest(t *testing.T) {
	now := time.Unix(1700000000, 0)
	extra := url.Values{"info": {"user_count,subscription_count"}, "auth_key": {"spoofed"}, "auth_signature": {"x"}, "Name": {"Something else"}}
	q := SignRequest(docsApp, "GET", "/apps/3/channels", extra, nil, now)
	if q.Has("body_md5") {
		t.Error("body_md5 set for an empty body")
	}
	if q.Get("auth_key") != docsApp.Key || len(q["auth_signature"]) != 1 {
		t.Errorf("reserved keys not replaced: %v", q)
	}
	if extra.Get("auth_key") != "spoofed" {
		t.Error("SignRequest modified extra")
	}
	want := hmacHex(docsApp.Secret, "GET\n/apps/3/channels\nauth_key="+docsApp.Key+"&auth_timestamp=1700000000&auth_version=1.0&info=user_count,subscription_count&name=Something else")
	if got := q.Get("auth_signature"); got != want {
		t.Errorf("auth_signature = %s, want %s", got, want)
	}
	// Through a real URL and back.
	parsed, err := url.ParseQuery(q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyRequest(docsApp, "GET", "/apps/3/channels", parsed, nil, now, 0); err != nil {
		t.Errorf("round trip: %v", err)
	}
	sum := md5.Sum([]byte("{}"))
	q = SignRequest(docsApp, "POST", "/apps/3/users/u1/terminate_connections", nil, []byte("{}"), now)
	if q.Get("body_md5") != hex.EncodeToString(sum[:]) {
		t.Errorf("body_md5 = %q", q.Get("body_md5"))
	}
}

// FuzzVerifyRequest checks that whatever SignRequest signs, VerifyRequest accepts (directly and
// after a trip through a URL query string), that a changed body or path is refused, and that
// random queries never panic.
func FuzzVerifyRequest(f *testing.F) {
	f.Add("POST", "/apps/3/events", "info", "user_count", "Name", "Something else", []byte(docsBody), int64(docsTimestamp), int64(0))
	f.Add("GET", "/apps/3/channels", "auth_signature", "x", "AUTH_KEY", "y", []byte(nil), int64(0), int64(-5))
	f.Fuzz(func(t *testing.T, method, path, k1, v1, k2, v2 string, body []byte, ts, skew int64) {
		app := &herald.App{Key: "key", Secret: "secret"}
		now := time.Unix(ts, 0)
		extra := url.Values{}
		extra.Add(k1, v1)
		extra.Add(k2, v2)
		q := SignRequest(app, method, path, extra, body, now)
		if err := VerifyRequest(app, method, path, q, body, now, 0); err != nil {
			t.Fatalf("signed request refused: %v (query %v)", err, q)
		}
		if parsed, err := url.ParseQuery(q.Encode()); err == nil {
			if err := VerifyRequest(app, method, path, parsed, body, now, 0); err != nil {
				t.Fatalf("signed request refused after URL round trip: %v", err)
			}
		}
		if VerifyRequest(app, method, path+"x", q, body, now, 0) == nil {
			t.Fatal("request accepted for another path")
		}
		if VerifyRequest(app, method, path, q, append(body, 'x'), now, 0) == nil {
			t.Fatal("request accepted for another body")
		}
		// Random queries: no panic, and only an exact signature passes.
		random := url.Values{k1: {v1}, k2: {v2}, "auth_timestamp": {strconv.FormatInt(ts+skew, 10)}}
		if VerifyRequest(app, method, path, random, body, now, time.Duration(skew)) == nil {
			t.Fatalf("unsigned query accepted: %v", random)
		}
	})
}
