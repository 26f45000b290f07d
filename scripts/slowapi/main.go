// Command slowapi stands in front of a Pusher-protocol server and holds every REST publish
// (POST .../events) for -delay before forwarding it, as a server whose API is slow under load
// does; everything else (WebSocket upgrades included) passes straight through. It shows what
// `herald-bench` reports when the publisher is throttled (coordinated omission), for the
// measurements in docs/benchmarks-archive.md:
//
//	go run ./scripts/slowapi -addr 127.0.0.1:6102 -to http://127.0.0.1:6101 -delay 150ms &
//	herald-bench multichannel --ws ws://127.0.0.1:6101 --rest http://127.0.0.1:6102 ...
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6102", "address to listen on")
	to := flag.String("to", "http://127.0.0.1:6001", "the server's base URL")
	delay := flag.Duration("delay", 100*time.Millisecond, "how long each publish is held")
	flag.Parse()
	u, err := url.Parse(*to)
	if err != nil {
		log.Fatalf("-to: %v", err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") {
			time.Sleep(*delay) // the slow server this stands for
		}
		proxy.ServeHTTP(w, r)
	})}
	log.Fatal(srv.ListenAndServe())
}
