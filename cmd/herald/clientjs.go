package main

import (
	"net/http"
	"strings"

	clientjs "github.com/herald-rt/herald/clients/js"
)

// withClientFiles serves the recovery helper (package clients/js) under /client/ on the
// public port, beside the API: apps load it from herald itself, without a package registry.
func withClientFiles(api http.Handler, release string) http.Handler {
	files := clientjs.Handler(release)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/client/") {
			files.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
