// Package js serves the recovery helper of this directory (@herald-rt/recovery, index.js) from
// herald itself, so that an app needs no package registry to use it:
//
//   - /client/recovery.mjs is index.js as it is, the ES module apps import;
//   - /client/recovery.js is the same code as a plain script for a page without a bundler:
//     it sets the global HeraldRecovery to {withRecovery, positionOf}.
//
// The files are embedded from this directory when herald is built, so what herald serves is
// always the helper of its own source: there is no second copy to drift. A Go test checks
// that the plain script is index.js with its exports turned into the global.
package js

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Module is index.js, the helper as an ES module.
//
//go:embed index.js
var Module []byte

// Paths served by Handler.
const (
	ModulePath = "/client/recovery.mjs"
	ScriptPath = "/client/recovery.js"
)

// Global is the name the plain script gives the helper's exports.
const Global = "HeraldRecovery"

// exportRE matches the only export form index.js uses: an exported function declaration at
// the start of a line.
var exportRE = regexp.MustCompile(`(?m)^export function ([A-Za-z_$][A-Za-z0-9_$]*)\b`)

// otherModuleSyntaxRE matches what a plain script cannot hold and Script does not rewrite:
// any other export, and imports.
var otherModuleSyntaxRE = regexp.MustCompile(`(?m)^\s*(export\b|import\b)`)

// Script turns the ES module src into a plain script: the same code in a function (strict, as
// a module is), whose exported functions become the properties of the global Global. It
// fails when src has an import, or an export that is not a function declaration.
func Script(src []byte) ([]byte, error) {
	names := exportRE.FindAllSubmatch(src, -1)
	if len(names) == 0 {
		return nil, errors.New("recovery helper: index.js exports no function")
	}
	body := exportRE.ReplaceAll(src, []byte("function $1"))
	if loc := otherModuleSyntaxRE.FindIndex(body); loc != nil {
		line := bytes.Count(body[:loc[0]], []byte("\n")) + 1
		return nil, fmt.Errorf("recovery helper: index.js line %d: only `export function` can become a plain script", line)
	}
	var b bytes.Buffer
	b.WriteString("// @herald-rt/recovery as a plain script, served by herald: sets window." + Global + " to\n")
	b.WriteString("// its exports. The ES module is " + ModulePath + "; the source is clients/js/index.js.\n")
	b.WriteString("(function () {\n'use strict';\n")
	b.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		b.WriteByte('\n')
	}
	exports := make([]string, len(names))
	for i, m := range names {
		exports[i] = fmt.Sprintf("%s: %s", m[1], m[1])
	}
	fmt.Fprintf(&b, "(typeof globalThis !== 'undefined' ? globalThis : self).%s = Object.freeze({ %s });\n})();\n",
		Global, strings.Join(exports, ", "))
	return b.Bytes(), nil
}

// file is one served file and its validator.
type file struct {
	body []byte
	etag string
}

func newFile(body []byte) file {
	sum := sha256.Sum256(body)
	return file{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// Handler serves ModulePath and ScriptPath (GET and HEAD) for herald of version release:
//
//   - Content-Type text/javascript, and Access-Control-Allow-Origin *, which a module
//     imported by a page of another origin needs (the files are public);
//   - an ETag (a hash of the file), which answers If-None-Match with 304;
//   - Cache-Control no-cache (a browser keeps the file and asks with If-None-Match each
//     time, so an upgraded herald's helper is used at once), or, when the query's v is
//     release, a year and immutable: a page that names herald's version in the URL is not
//     asked again until the version it names changes. A development build's version ("dev",
//     or a revision ending in "-dirty") is never cached so.
//
// Any other path under /client/ is 404.
func Handler(release string) http.Handler {
	files := map[string]file{ModulePath: newFile(Module)}
	script, scriptErr := Script(Module)
	if scriptErr == nil {
		files[ScriptPath] = newFile(script)
	}
	immutable := release != "" && release != "dev" && !strings.HasSuffix(release, "-dirty")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			if r.URL.Path == ScriptPath && scriptErr != nil {
				http.Error(w, scriptErr.Error(), http.StatusInternalServerError)
				return
			}
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("ETag", f.etag)
		if immutable && r.URL.Query().Get("v") == release {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
