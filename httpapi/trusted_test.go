package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTrustedEventsAnswersAsREST: the console's event creator (TrustedEvents) validates and
// answers exactly as a signed POST /apps/{id}/events, and delivers like it.
func TestTrustedEventsAnswersAsREST(t *testing.T) {
	e := newEnv(t)
	sub, _ := e.subscriber("room-a")
	trusted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.api.TrustedEvents(w, r, strings.TrimPrefix(r.URL.Path, "/"))
	}))
	defer trusted.Close()
	post := func(app, body string) (int, []byte, string) {
		t.Helper()
		resp, err := http.Post(trusted.URL+"/"+app, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes(), resp.Header.Get("Content-Type")
	}

	for _, body := range []string{
		`{"name":"greet","channel":"room a","data":"x"}`,                                 // bad channel name
		`{"name":"","channel":"room-a","data":"x"}`,                                      // no event name
		`{"name":"greet","data":"x"}`,                                                    // no channel
		`{"name":"greet","channel":"a","channels":["b"],"data":"x"}`,                     // both
		`{"name":"greet","channel":"room-a","data":"` + strings.Repeat("x", 1001) + `"}`, // over app 1's payload limit
		`{"name":"greet","channel":"room-a","data":`,                                     // not JSON
		`{"name":"` + strings.Repeat("e", 201) + `","channel":"room-a","data":"x"}`,      // event name too long
		`{"name":"greet","channel":"room-a","data":"x","socket_id":"1"}`,                 // bad socket id
	} {
		wantStatus, wantBody := e.call("POST", "/apps/1/events", nil, body)
		if wantStatus == http.StatusOK {
			t.Fatalf("REST accepted %s: the case tests nothing", body)
		}
		status, got, ct := post("1", body)
		if status != wantStatus || !bytes.Equal(got, wantBody) || ct != "application/json" {
			t.Errorf("body %.60s: console answered %d %s (%s); REST answered %d %s", body, status, got, ct, wantStatus, wantBody)
		}
	}

	status, got, _ := post("nope", `{"name":"greet","channel":"room-a","data":"x"}`)
	if status != http.StatusNotFound || !strings.Contains(string(got), `app \"nope\" does not exist`) {
		t.Errorf("unknown app: %d %s; want 404 naming it", status, got)
	}

	status, got, _ = post("1", `{"name":"greet","channel":"room-a","data":"{\"n\":1}"}`)
	if status != http.StatusOK || strings.TrimSpace(string(got)) != `{}` {
		t.Fatalf("valid event: %d %s", status, got)
	}
	expectEvent(t, sub, "greet", "room-a", `{"n":1}`)
}
