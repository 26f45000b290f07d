package js

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleIsIndexJS: what herald serves as the ES module is index.js of this directory, byte
// for byte (the embedded file, not a copy that could drift).
func TestModuleIsIndexJS(t *testing.T) {
	disk, err := os.ReadFile("index.js")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler("v1.2.3"))
	defer srv.Close()
	for _, path := range []string{ModulePath, ModulePath + "?v=v1.2.3"} {
		resp, body := get(t, srv.URL+path, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, disk) {
			t.Fatalf("%s: %d, %d bytes; want 200 and index.js's %d bytes", path, resp.StatusCode, len(body), len(disk))
		}
	}
}

// TestScriptIsIndexJSWithAGlobal: the plain script is index.js, its `export function`s made
// plain functions, in a strict function that sets the global to the exports; nothing else of
// index.js changes.
func TestScriptIsIndexJSWithAGlobal(t *testing.T) {
	s, err := Script(Module)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(string(Module), "\nexport function ", "\nfunction ")
	if !strings.Contains(string(s), "(function () {\n'use strict';\n"+want) {
		t.Fatalf("the plain script is not index.js (exports removed) in a strict function:\n%.600s", s)
	}
	if !strings.HasSuffix(string(s), "Object.freeze({ withRecovery: withRecovery, positionOf: positionOf });\n})();\n") {
		t.Fatalf("the plain script does not end by setting %s to the exports:\n%s", Global, s[max(0, len(s)-300):])
	}
	for _, bad := range []string{
		"export const x = 1;\nexport function f() {}\n",
		"import Pusher from 'pusher-js';\nexport function f() {}\n",
		"export default function f() {}\n",
		"function f() {}\n",
	} {
		if _, err := Script([]byte(bad)); err == nil {
			t.Errorf("Script accepted %q", bad)
		}
	}
}

// TestScriptRunsInNode: the plain script is valid JavaScript that, run as a classic script,
// sets the global with working functions (the browser test of test/js loads it in Chromium
// from herald's own URL).
func TestScriptRunsInNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if testing.Short() {
			t.Skip("-short: node is not installed")
		}
		t.Fatal("node is not installed (scripts/test.sh installs it)")
	}
	s, err := Script(Module)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "recovery.js")
	if err := os.WriteFile(file, s, 0o600); err != nil {
		t.Fatal(err)
	}
	// vm.runInNewContext runs it as a browser runs a classic script: no module scope.
	prog := `const vm = require('vm'), fs = require('fs');
const ctx = { self: {} };
vm.runInNewContext(fs.readFileSync(process.argv[1], 'utf8'), ctx, { filename: 'recovery.js' });
const h = ctx.` + Global + `;
let refused = '';
try { h.withRecovery({}); } catch (e) { refused = e.name + ': ' + e.message; }
console.log(JSON.stringify({ keys: Object.keys(h), frozen: Object.isFrozen(h), refused, position: h.positionOf({}, 'x') === undefined }));`
	out, err := exec.Command(node, "-e", prog, file).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want := `{"keys":["withRecovery","positionOf"],"frozen":true,"refused":"TypeError: withRecovery: expected a pusher-js client (new Pusher(key, options))","position":true}`
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("node ran the plain script:\n got %s\nwant %s", got, want)
	}
}

// TestHandlerCaching: an ETag on both files, 304 for If-None-Match, no-cache unless the URL
// names herald's release (then a year, immutable), CORS for a module imported across
// origins, HEAD, and refusals of other methods and paths.
func TestHandlerCaching(t *testing.T) {
	srv := httptest.NewServer(Handler("v1.2.3"))
	defer srv.Close()
	script, _ := Script(Module)
	for path, body := range map[string][]byte{ModulePath: Module, ScriptPath: script} {
		resp, got := get(t, srv.URL+path, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
			t.Fatalf("%s: %d, %d bytes", path, resp.StatusCode, len(got))
		}
		h := resp.Header
		etag := h.Get("ETag")
		for k, v := range map[string]string{"Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "no-cache",
			"Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff"} {
			if h.Get(k) != v {
				t.Errorf("%s: %s %q, want %q", path, k, h.Get(k), v)
			}
		}
		if len(etag) < 10 || etag[0] != '"' {
			t.Fatalf("%s: ETag %q", path, etag)
		}
		resp, got = get(t, srv.URL+path, map[string]string{"If-None-Match": etag})
		if resp.StatusCode != http.StatusNotModified || len(got) != 0 {
			t.Errorf("%s with If-None-Match: %d, %d bytes; want 304 and no body", path, resp.StatusCode, len(got))
		}
		resp, _ = get(t, srv.URL+path+"?v=v1.2.3", nil)
		if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s?v=v1.2.3: Cache-Control %q, want a year, immutable", path, cc)
		}
		resp, _ = get(t, srv.URL+path+"?v=v1.2.2", nil)
		if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s?v= another release: Cache-Control %q, want no-cache", path, cc)
		}
		req, _ := http.NewRequest(http.MethodHead, srv.URL+path, nil)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != etag {
			t.Errorf("HEAD %s: %v %v", path, resp, err)
		}
		resp, err := http.Post(srv.URL+path, "text/plain", strings.NewReader("x"))
		if err != nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %v %v", path, resp, err)
		}
	}
	if a, b := newFile(Module).etag, newFile(script).etag; a == b {
		t.Errorf("the two files share the ETag %s", a)
	}
	for _, path := range []string{"/client/", "/client/index.js", "/client/recovery.mjs.map", "/client/serve.go"} {
		if resp, _ := get(t, srv.URL+path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
	for _, release := range []string{"dev", "0123456789ab-dirty", ""} {
		dev := httptest.NewServer(Handler(release))
		resp, _ := get(t, dev.URL+ScriptPath+"?v="+release, nil)
		dev.Close()
		if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("release %q, ?v=%s: Cache-Control %q, want no-cache (a development build)", release, release, cc)
		}
	}
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}
