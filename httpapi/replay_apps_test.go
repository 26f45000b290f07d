package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/cluster"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/session"
)

// TestReplayBoundPerApp: replay protection's bound is each app's own, so an app that has
// filled it (503 for its own requests) leaves every other app's signed requests alone.
func TestReplayBoundPerApp(t *testing.T) {
	apps := herald.NewStaticApps([]herald.App{
		{ID: "1", Key: "key-one", Secret: "secret-one"},
		{ID: "2", Key: "key-two", Secret: "secret-two"},
	})
	h, err := session.New(session.Config{Workers: 1, MaxConnections: 10}, apps, cluster.LocalState(cluster.Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, node: h}
	e.app, _ = apps.AppByID("1")
	e.app2, _ = apps.AppByID("2")
	e.api = httpapi.New(httpapi.Config{ReplayProtection: true, ReplayMaxPerApp: 3}, apps, h, nil, nil, nil)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	// Each request is signed afresh: a distinct query makes a distinct signature.
	get := func(app *herald.App, i int) (int, []byte) {
		path := "/apps/" + app.ID + "/channels"
		return e.do("GET", e.signedURL(app, "GET", path, url.Values{"filter_by_prefix": {fmt.Sprint("p", i)}}, "", time.Now()), "")
	}
	for i := range 3 {
		if status, body := get(e.app, i); status != 200 {
			t.Fatalf("app 1, request %d: %d %s", i, status, body)
		}
	}
	status, body := get(e.app, 3)
	if msg := wantError(t, status, body, 503); !strings.Contains(msg, "this app") {
		t.Fatalf("app 1 over its bound: %q", msg)
	}
	for i := range 3 {
		if status, body := get(e.app2, i); status != 200 {
			t.Fatalf("app 2, request %d, after app 1 filled its bound: %d %s", i, status, body)
		}
	}
}
