package pusher

import (
	"cmp"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herald-rt/herald"
)

// DefaultRequestWindow is how far a REST request's auth_timestamp may be from the server's
// clock when VerifyRequest is given a window of zero: Pusher's documented 600 seconds.
const DefaultRequestWindow = 600 * time.Second

// restAuthVersion is the only auth_version Pusher defines.
const restAuthVersion = "1.0"

// VerifyRequest checks a signed REST request (docs/protocol.md, "Signing"): VerifyQuery, then
// CheckBodyMD5 on the body. A server that reads the body from the network calls the two
// apart, so that an unsigned request is refused before its body is read.
func VerifyRequest(app *herald.App, method, path string, query url.Values, body []byte, now time.Time, window time.Duration) error {
	if err := VerifyQuery(app, method, path, query, len(body) > 0, now, window); err != nil {
		return err
	}
	return CheckBodyMD5(query, body)
}

// VerifyQuery checks everything of a signed REST request that the query string holds, before
// the body is read: auth_key must be app.Key, auth_version "1.0", auth_timestamp within window
// of now in either direction (window <= 0 means DefaultRequestWindow), body_md5 present when
// hasBody (a body is announced), well formed whenever present, and auth_signature the hex
// HMAC-SHA256, keyed by app.Secret, of
//
//	METHOD + "\n" + path + "\n" + join("&", "key=value" for every other query parameter)
//
// with keys lowercased, pairs sorted by key (then value) and nothing URL-encoded. pusher-http-node
// sorts without lowercasing; a request whose keys are not all lowercase is also accepted when
// signed that way. path is the path the client signed, normally r.URL.Path. The signature
// covers body_md5, so once the body is read CheckBodyMD5 completes the check. Signatures
// compare in constant time. The error is a *herald.Error with herald.CodeUnauthorized.
func VerifyQuery(app *herald.App, method, path string, query url.Values, hasBody bool, now time.Time, window time.Duration) error {
	if app == nil || app.Secret == "" {
		return unauthorized("unknown app")
	}
	key, err := single(query, "auth_key")
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(key), []byte(app.Key)) {
		return unauthorized("invalid auth_key")
	}
	sigHex, err := single(query, "auth_signature")
	if err != nil {
		return err
	}
	version, err := single(query, "auth_version")
	if err != nil {
		return err
	}
	if version != restAuthVersion {
		return unauthorized("unsupported auth_version %q (want %q)", version, restAuthVersion)
	}
	ts, err := single(query, "auth_timestamp")
	if err != nil {
		return err
	}
	sec, perr := strconv.ParseInt(ts, 10, 64)
	if perr != nil {
		return unauthorized("invalid auth_timestamp %q", ts)
	}
	if window <= 0 {
		window = DefaultRequestWindow
	}
	switch age := now.Sub(time.Unix(sec, 0)); {
	case age > window:
		return unauthorized("auth_timestamp expired: %d is more than %s before the server's time", sec, window)
	case age < -window:
		return unauthorized("auth_timestamp is more than %s ahead of the server's time", window)
	}
	if _, err := bodyMD5(query, hasBody); err != nil {
		return err
	}
	var sig [sha256.Size]byte
	if len(sigHex) != hex.EncodedLen(len(sig)) {
		return unauthorized("invalid signature")
	}
	if _, err := hex.Decode(sig[:], []byte(sigHex)); err != nil {
		return unauthorized("invalid signature")
	}
	if hmac.Equal(requestMAC(app.Secret, method, path, query, true), sig[:]) {
		return nil
	}
	if hasUpperKey(query) && hmac.Equal(requestMAC(app.Secret, method, path, query, false), sig[:]) {
		return nil
	}
	return unauthorized("invalid signature")
}

// SignRequest returns the query parameters a Pusher server library sends with a request:
// extra (less any auth_* and body_md5 keys it holds) plus auth_key, auth_timestamp (now),
// auth_version, body_md5 when body is not empty, and auth_signature. For tests and load tools.
func SignRequest(app *herald.App, method, path string, extra url.Values, body []byte, now time.Time) url.Values {
	q := make(url.Values, len(extra)+5)
	for k, vs := range extra {
		q[k] = slices.Clone(vs)
	}
	for _, k := range []string{"auth_key", "auth_timestamp", "auth_version", "auth_signature", "body_md5"} {
		delete(q, k)
	}
	q.Set("auth_key", app.Key)
	q.Set("auth_timestamp", strconv.FormatInt(now.Unix(), 10))
	q.Set("auth_version", restAuthVersion)
	if len(body) > 0 {
		sum := md5.Sum(body)
		q.Set("body_md5", hex.EncodeToString(sum[:]))
	}
	q.Set("auth_signature", hex.EncodeToString(requestMAC(app.Secret, method, path, q, true)))
	return q
}

// requestMAC is the HMAC of a request's string to sign; lower selects lowercased keys.
func requestMAC(secret, method, path string, query url.Values, lower bool) []byte {
	type pair struct{ k, v string }
	pairs := make([]pair, 0, len(query))
	for k, vs := range query {
		if k == "auth_signature" {
			continue
		}
		if lower {
			k = strings.ToLower(k)
		}
		for _, v := range vs {
			pairs = append(pairs, pair{k, v})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(strings.Compare(a.k, b.k), strings.Compare(a.v, b.v))
	})
	mac := hmac.New(sha256.New, []byte(secret))
	io.WriteString(mac, strings.ToUpper(method))
	io.WriteString(mac, "\n")
	io.WriteString(mac, path)
	io.WriteString(mac, "\n")
	for i, p := range pairs {
		if i > 0 {
			io.WriteString(mac, "&")
		}
		io.WriteString(mac, p.k)
		io.WriteString(mac, "=")
		io.WriteString(mac, p.v)
	}
	return mac.Sum(nil)
}

// CheckBodyMD5 checks the body of a request whose query VerifyQuery accepted: body_md5 must be
// present when the body is not empty, and equal to the body's MD5 whenever present.
func CheckBodyMD5(query url.Values, body []byte) error {
	got, err := bodyMD5(query, len(body) > 0)
	if err != nil || got == nil {
		return err
	}
	if want := md5.Sum(body); !hmac.Equal(want[:], got) {
		return unauthorized("body_md5 mismatch")
	}
	return nil
}

// bodyMD5 returns the decoded body_md5 parameter, nil when there is none; it is required
// when hasBody.
func bodyMD5(query url.Values, hasBody bool) ([]byte, error) {
	vs := query["body_md5"]
	switch {
	case len(vs) == 0 && !hasBody:
		return nil, nil
	case len(vs) == 0:
		return nil, unauthorized("missing body_md5")
	case len(vs) > 1:
		return nil, unauthorized("duplicate body_md5")
	}
	got := make([]byte, md5.Size)
	if len(vs[0]) != hex.EncodedLen(len(got)) {
		return nil, unauthorized("body_md5 mismatch")
	}
	if _, err := hex.Decode(got, []byte(vs[0])); err != nil {
		return nil, unauthorized("body_md5 mismatch")
	}
	return got, nil
}

// single returns the one value of a required parameter.
func single(query url.Values, key string) (string, error) {
	switch vs := query[key]; len(vs) {
	case 0:
		return "", unauthorized("missing %s", key)
	case 1:
		return vs[0], nil
	default:
		return "", unauthorized("duplicate %s", key)
	}
}

func hasUpperKey(query url.Values) bool {
	for k := range query {
		if strings.ToLower(k) != k {
			return true
		}
	}
	return false
}

func unauthorized(format string, args ...any) error {
	return herald.Errorf(herald.CodeUnauthorized, format, args...)
}
