package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/herald-rt/herald/internal/servicetest"
	"github.com/herald-rt/herald/internal/wstest"
)

const apiToken = "apps-api-test-token-0123"

// call sends an apps API request to n's metrics listener with the console token (unless
// bearer is false), as JSON unless it is a GET, and returns the status and the decoded JSON
// body.
func call(t *testing.T, n *node, method, path, body string, bearer bool) (int, map[string]any) {
	t.Helper()
	h := map[string]string{}
	if method != "GET" {
		h["Content-Type"] = "application/json"
	}
	return callWith(t, n, method, path, body, bearer, h)
}

// callWith is call with the headers given instead.
func callWith(t *testing.T, n *node, method, path, body string, bearer bool, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.metrics+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if bearer {
		req.Header.Set("Authorization", "Bearer "+apiToken)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s answered %d with no JSON object: %q", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

// TestAppsAPI: the console's apps API on a node whose apps are in PostgreSQL: create (the
// secret shown once), list (never a secret), update, disable (the app's connections closed
// with 4003, on this node and on the other), rotate the secret; bad input gets a JSON error
// with its HTTP status; without the token, 401.
func TestAppsAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts PostgreSQL and two nodes")
	}
	pg := servicetest.Postgres(t)
	url := pg.PostgresURL()
	pgExec(t, url, soketiPostgres)
	flags := []string{"--app-store-postgres-url", url, "--app-store-postgres-install-trigger", "--console-token", apiToken}
	a, b := startServe(t, "a", flags...), startServe(t, "b", flags...)
	for _, n := range []*node{a, b} {
		until(t, n.name+" up", func() bool { h := n.storeHealth(t); return h.AppStore != nil && h.AppStore.Up && h.AppStore.Listening })
	}

	if code, _ := call(t, a, "GET", "/console/api/apps", "", false); code != 401 {
		t.Fatalf("without the token: %d, want 401", code)
	}
	code, created := call(t, a, "POST", "/console/api/apps", `{"id":"shop","enable_client_messages":true,"limits":{"max_connections":50}}`, true)
	if code != 201 || created["id"] != "shop" || created["secret"] == nil || created["key"] == nil {
		t.Fatalf("create: %d %v", code, created)
	}
	key, secret := created["key"].(string), created["secret"].(string)
	if len(secret) < 32 || len(key) < 20 {
		t.Errorf("generated key %q and secret %q: want at least 20 and 32 characters", key, secret)
	}
	code, list := call(t, a, "GET", "/console/api/apps", "", true)
	apps, _ := list["apps"].([]any)
	if code != 200 || len(apps) != 1 || list["writable"] != true {
		t.Fatalf("list: %d %v", code, list)
	}
	if first := apps[0].(map[string]any); first["secret"] != nil || first["key"] != key || first["enabled"] != true {
		t.Errorf("listed app %v: want its key, enabled, and no secret", first)
	}

	// The new app connects on both nodes, at once on a (it wrote it) and by notification on b.
	for _, n := range []*node{a, b} {
		until(t, n.name+" to accept the created app's key", func() bool { c, _ := dialKey(t, n, key); return c != nil })
	}
	ca, _ := dialKey(t, a, key)
	cb, _ := dialKey(t, b, key)

	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/console/api/apps", `{"id":"shop"}`, 409},
		{"POST", "/console/api/apps", `{"id":"bad id!"}`, 400},
		{"POST", "/console/api/apps", `{"id":"x","limits":{"max_connections":-1}}`, 400},
		{"POST", "/console/api/apps", `{"id":"x","colour":"blue"}`, 400},
		{"POST", "/console/api/apps", `{"id":"x","secret":"mine"}`, 400},
		{"POST", "/console/api/apps", `not json`, 400},
		{"PATCH", "/console/api/apps/nobody", `{"enabled":false}`, 404},
		{"PATCH", "/console/api/apps/shop", `{"allowed_origins":["https://a/b"]}`, 400},
		{"PATCH", "/console/api/apps/shop", `{"history":[{"channels":"a-*","size":0,"ttl":"1m"}]}`, 400},
		{"PATCH", "/console/api/apps/shop", `{"history":[{"channels":"a-*","size":1,"ttl":"soon"}]}`, 400},
		{"POST", "/console/api/apps", `{"id":"x","history":[{"channels":"a-*","size":1,"ttl":"1m","sise":2}]}`, 400},
		{"POST", "/console/api/apps/nobody/disable", ``, 404},
	} {
		if code, body := call(t, a, tc.method, tc.path, tc.body, true); code != tc.status || body["error"] == nil || body["code"] != float64(tc.status) {
			t.Errorf("%s %s %s: %d %v; want %d with a JSON error", tc.method, tc.path, tc.body, code, body, tc.status)
		}
	}

	code, upd := call(t, a, "PATCH", "/console/api/apps/shop", `{"limits":{"max_connections":7},"enable_user_authentication":true}`, true)
	if lim, _ := upd["limits"].(map[string]any); code != 200 || lim["max_connections"] != float64(7) || upd["enable_user_authentication"] != true || upd["secret"] != nil {
		t.Errorf("update: %d %v", code, upd)
	}

	code, rot := call(t, a, "POST", "/console/api/apps/shop/rotate-secret", "", true)
	if code != 200 || rot["secret"] == nil || rot["secret"] == secret {
		t.Errorf("rotate: %d %v; want a new secret", code, rot)
	}

	// A write that does not declare JSON, or that a page of another origin sent, changes nothing.
	if code, body := callWith(t, a, "POST", "/console/api/apps/shop/disable", "", true, nil); code != 415 || body["code"] != float64(415) {
		t.Errorf("disable without a Content-Type: %d %v; want 415 with a JSON error", code, body)
	}
	if code, body := callWith(t, a, "POST", "/console/api/apps/shop/disable", "", true,
		map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); code != 403 ||
		!strings.Contains(fmt.Sprint(body["error"]), "Sec-Fetch-Site: cross-site") {
		t.Errorf("disable from another site: %d %v; want 403 naming why", code, body)
	}
	if code, got := call(t, a, "GET", "/console/api/apps/shop", "", true); code != 200 || got["enabled"] != true {
		t.Fatalf("the refused writes changed the app: %d %v", code, got)
	}

	if code, dis := call(t, a, "POST", "/console/api/apps/shop/disable", "", true); code != 200 || dis["enabled"] != false {
		t.Fatalf("disable: %d %v", code, dis)
	}
	for i, c := range []*wstest.Client{ca, cb} {
		if code, err := c.ExpectClose(clusterWait); err != nil || code != 4003 {
			t.Errorf("node %d: the disabled app's connection: close %d, %v; want 4003", i, code, err)
		}
	}
	if code, en := call(t, a, "POST", "/console/api/apps/shop/enable", "", true); code != 200 || en["enabled"] != true {
		t.Errorf("enable: %d %v", code, en)
	}
}

// TestAppsAPIFileStore: with the apps in the configuration the API lists them and refuses
// writes with 405 and why.
func TestAppsAPIFileStore(t *testing.T) {
	n := startServe(t, "file", "--console-token", apiToken)
	until(t, "the node up", func() bool { return n.storeHealth(t).Status == "ok" })
	code, list := call(t, n, "GET", "/console/api/apps", "", true)
	if apps, _ := list["apps"].([]any); code != 200 || len(apps) != 1 || list["writable"] != false {
		t.Fatalf("list: %d %v; want the development app, not writable", code, list)
	}
	code, body := call(t, n, "POST", "/console/api/apps", `{"id":"x"}`, true)
	if msg, _ := body["error"].(string); code != 405 || !strings.Contains(msg, "configuration file") {
		t.Errorf("create with the file store: %d %v; want 405 saying the apps come from the configuration file", code, body)
	}
}
