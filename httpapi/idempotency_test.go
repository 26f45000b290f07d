package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// keyed sends a signed request for app 1 with the idempotency key header (none when key is "").
func (e *env) keyed(path, key, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.signedURL(e.app, "POST", path, nil, body, time.Now()), strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Idempotency-Key", key)
	}
	return e.send(req)
}

// A publish repeated with its key, by header or by field, is answered as the first was and
// delivers nothing again: the subscriber's next event after the repeats is the marker.
func TestIdempotentPublish(t *testing.T) {
	e := newEnv(t)
	a, _ := e.subscriber("room-a")
	b, _ := e.subscriber("room-b")
	for range 3 {
		status, body := e.keyed("/apps/1/events", "order-17", `{"name":"once","channels":["room-a","room-b"],"data":"1"}`)
		e.wantOK(status, body, `{}`)
	}
	for range 2 {
		status, body := e.keyed("/apps/1/events", "", `{"name":"field","channel":"room-a","data":"2","idempotency_key":"f-1"}`)
		e.wantOK(status, body, `{}`)
	}
	// A batch's header key names each event by its index; an event's own key wins.
	for range 2 {
		status, body := e.keyed("/apps/1/batch_events", "batch-9", `{"batch":[
			{"channel":"room-a","name":"b0","data":"x"},
			{"channel":"room-b","name":"b1","data":"y","idempotency_key":"own"}]}`)
		e.wantOK(status, body, `{}`)
	}
	// The same key on another channel is another event; the header key of a batch is not the
	// key of an /events call.
	status, body := e.keyed("/apps/1/batch_events", "", `{"batch":[{"channel":"room-b","name":"again-elsewhere","data":"z","idempotency_key":"f-1"}]}`)
	e.wantOK(status, body, `{}`)
	status, body = e.call("POST", "/apps/1/events", nil, `{"name":"marker","channels":["room-a","room-b"],"data":"m"}`)
	e.wantOK(status, body, `{}`)
	expectEvent(t, a, "once", "room-a", "1")
	expectEvent(t, a, "field", "room-a", "2")
	expectEvent(t, a, "b0", "room-a", "x")
	expectEvent(t, a, "marker", "room-a", "m")
	expectEvent(t, b, "once", "room-b", "1")
	expectEvent(t, b, "b1", "room-b", "y")
	expectEvent(t, b, "again-elsewhere", "room-b", "z")
	expectEvent(t, b, "marker", "room-b", "m")
}

// A malformed or over-long key is refused with a 400 that names where it came from, and
// publishes nothing.
func TestIdempotencyKeyInvalid(t *testing.T) {
	e := newEnv(t)
	a, _ := e.subscriber("room-a")
	for _, tc := range []struct{ name, path, header, body, names string }{
		{"long header", "/apps/1/events", strings.Repeat("k", 129), `{"name":"n","channel":"room-a","data":"d"}`, "X-Idempotency-Key header"},
		{"space in header", "/apps/1/events", "a b", `{"name":"n","channel":"room-a","data":"d"}`, "X-Idempotency-Key header"},
		{"empty field", "/apps/1/events", "", `{"name":"n","channel":"room-a","data":"d","idempotency_key":""}`, "idempotency_key"},
		{"long field", "/apps/1/events", "", `{"name":"n","channel":"room-a","data":"d","idempotency_key":"` + strings.Repeat("k", 129) + `"}`, "idempotency_key"},
		{"field not a string", "/apps/1/events", "", `{"name":"n","channel":"room-a","data":"d","idempotency_key":7}`, "idempotency_key"},
		{"batch field", "/apps/1/batch_events", "", `{"batch":[{"channel":"room-a","name":"n","data":"d"},{"channel":"room-a","name":"n","data":"d","idempotency_key":"é"}]}`, "batch[1].idempotency_key"},
	} {
		status, body := e.keyed(tc.path, tc.header, tc.body)
		msg := wantError(t, status, body, http.StatusBadRequest)
		if !strings.Contains(msg, tc.names) {
			t.Errorf("%s: error %q does not name %s", tc.name, msg, tc.names)
		}
	}
	status, body := e.call("POST", "/apps/1/events", nil, `{"name":"marker","channel":"room-a","data":"m"}`)
	e.wantOK(status, body, `{}`)
	expectEvent(t, a, "marker", "room-a", "m")
}
