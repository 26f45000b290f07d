package pusher

import (
	"net/url"
	"testing"
	"time"

	"github.com/herald-rt/herald"
)

// FuzzVerifyQuerySplit checks that verifying in two steps, the query before the body is read
// and body_md5 after, decides exactly as VerifyRequest does, whatever the query and body; and
// that a request whose body is announced but whose query has no body_md5 is refused before
// the body.
func FuzzVerifyQuerySplit(f *testing.F) {
	f.Add("POST", "/apps/3/events", "body_md5", docsBodyMD5, "auth_signature", docsSignature, []byte(docsBody), true)
	f.Add("GET", "/apps/3/channels", "info", "user_count", "x", "y", []byte(nil), false)
	f.Fuzz(func(t *testing.T, method, path, k1, v1, k2, v2 string, body []byte, sign bool) {
		app := &herald.App{Key: "key", Secret: "secret"}
		now := time.Unix(docsTimestamp, 0)
		q := url.Values{k1: {v1}, k2: {v2}, "auth_key": {"key"}, "auth_version": {"1.0"}, "auth_timestamp": {"1353088179"}}
		if sign {
			q = SignRequest(app, method, path, url.Values{k1: {v1}}, body, now)
		}
		whole := VerifyRequest(app, method, path, q, body, now, 0)
		split := VerifyQuery(app, method, path, q, len(body) > 0, now, 0)
		if split == nil {
			split = CheckBodyMD5(q, body)
		}
		if (whole == nil) != (split == nil) {
			t.Fatalf("VerifyRequest says %v, VerifyQuery+CheckBodyMD5 say %v (query %v)", whole, split, q)
		}
		if sign && whole != nil {
			t.Fatalf("signed request refused: %v", whole)
		}
		if len(q["body_md5"]) == 0 && VerifyQuery(app, method, path, q, true, now, 0) == nil {
			t.Fatalf("announced body without body_md5 accepted before the body: %v", q)
		}
	})
}
