package httpapi_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/herald-rt/herald/httpapi"
	"github.com/herald-rt/herald/internal/poll"
)

// FuzzRawRequest sends arbitrary bytes to a Port serving the API, as one client would, then
// half-closes: whatever they are (pipelined requests, chunked or announced bodies that never
// come, upgrades, garbage), the server must answer or close within its deadlines, and the
// port must count the connection out again.
func FuzzRawRequest(f *testing.F) {
	e := newPortEnv(f, httpapi.PortConfig{MaxConns: 16, HeaderTimeout: time.Second, RequestTimeout: time.Second, IdleTimeout: time.Second},
		httpapi.Config{MaxBodyBytes: 4096, ReplayProtection: true}, 10)
	body := `{"name":"e","channel":"c","data":"d"}`
	for _, s := range []string{
		"POST " + issuePath + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789",
		"POST " + signedPath(e.app, "POST", "/apps/1/events", body) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 37\r\n\r\n" + body,
		"POST " + signedPath(e.app, "POST", "/apps/1/events", body) + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n25\r\n" + body + "\r\n0\r\n\r\n",
		"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /ready HTTP/1.1\r\nHost: x\r\n\r\nGET /nowhere HTTP/1.0\r\n\r\n",
		"GET /app/key-one?protocol=7 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n\x81\x85abcd",
		"POST /apps/1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n",
		"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(15 * time.Second))
		if _, err := c.Write(data); err != nil {
			return // closed by the server before all of it was read: allowed
		}
		_ = c.(*net.TCPConn).CloseWrite()
		_, err = io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("no answer and no close within 15 s for %q", data)
		}
		c.Close()
		poll.NoError(t, 15*time.Second, "the port to count the connection out", func() error {
			if st := e.port.Stats(); st.Open != 0 {
				return fmt.Errorf("%+v", st)
			}
			return nil
		})
	})
}
