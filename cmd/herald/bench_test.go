package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/hub"
)

// benchServer serves a herald hub and REST API on a free port of 127.0.0.1, with wrap (when
// not nil) in front of the API, and returns the flags that point herald bench at it.
func benchServer(t *testing.T, wrap func(http.Handler) http.Handler) []string {
	t.Helper()
	apps := herald.NewStaticApps([]herald.App{{ID: "app-id", Key: "app-key", Secret: "app-secret", Limits: herald.DefaultLimits}})
	h, err := hub.New(hub.Config{}, apps.Apps(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var api http.Handler = httpapi.New(httpapi.Config{}, apps, h, func() httpapi.HealthReport { return httpapi.HealthReport{Status: "ok"} }, nil, nil)
	if wrap != nil {
		api = wrap(api)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		_ = h.Shutdown(context.Background())
	})
	addr := ln.Addr().String()
	return []string{"--ws", "ws://" + addr, "--rest", "http://" + addr, "--timeout", "30s", "--quiet"}
}

// TestBenchPublishShortestRun: herald bench publish --duration 1ns still makes one request
// per publisher, measures their deliveries and exits 0.
func TestBenchPublishShortestRun(t *testing.T) {
	args := append([]string{"publish"}, benchServer(t, nil)...)
	args = append(args, "--duration", "1ns", "--publishers", "2", "--channels", "2", "--wait", "30s")
	var stdout, stderr bytes.Buffer
	if code := benchCmd(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !regexp.MustCompile(`published +2 requests, 0 failed; 2 events accepted`).MatchString(stdout.String()) ||
		!strings.Contains(stdout.String(), "2 of 2 (100.00%)") {
		t.Fatalf("report lacks 2 requests, 2 events and 2 deliveries:\n%s", stdout.String())
	}
}

// TestBenchPublishNothingDelivered: a server that accepts every event and delivers none makes
// herald bench publish fail, saying it measured nothing.
func TestBenchPublishNothingDelivered(t *testing.T) {
	swallow := func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				io.WriteString(w, "{}")
				return
			}
			api.ServeHTTP(w, r)
		})
	}
	args := append([]string{"publish"}, benchServer(t, swallow)...)
	// Nothing will ever arrive: a short wait proves it as well as a long one.
	args = append(args, "--duration", "1ns", "--publishers", "2", "--channels", "2", "--wait", "100ms")
	var stdout, stderr bytes.Buffer
	code := benchCmd(args, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "herald bench publish: the run measured nothing: none of the 2 expected deliveries arrived") {
		t.Fatalf("exit %d, stderr %q; want 1 and that nothing was measured", code, stderr.String())
	}
}
