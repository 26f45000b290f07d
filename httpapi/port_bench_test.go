package httpapi_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-rt/herald/httpapi"
)

// BenchmarkPortRequest measures one keep-alive POST with a small body over loopback, served
// by a plain http.Server and by a Port (connection tracking: the ConnState hook, the request
// copy that watches the body, the lists), to show what the tracking costs per request.
func BenchmarkPortRequest(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "{}")
	})
	for _, tc := range []struct {
		name  string
		serve func(b *testing.B) string
	}{
		{"plain", func(b *testing.B) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{Handler: h, ReadTimeout: 10 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			b.Cleanup(func() { srv.Close() })
			return ln.Addr().String()
		}},
		{"port", func(b *testing.B) string {
			_, addr := serveOn(b, httpapi.PortConfig{}, h)
			return addr
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			addr := tc.serve(b)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			url := "http://" + addr + "/apps/1/events"
			body := `{"name":"e","channel":"c","data":"d"}`
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
