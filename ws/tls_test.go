package ws

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/herald-rt/herald/internal/tlstest"
	"github.com/herald-rt/herald/internal/wstest"
)

// newTLSHarness is newHarness behind TLS: the server's listener is NewTLSListener's, so the
// upgrade hands the engine a TLS connection. It returns the client's TLS config.
func newTLSHarness(t *testing.T, cfg Config, maxVersion uint16) (*harness, *tls.Config) {
	t.Helper()
	ca := tlstest.NewCA(t)
	leaf := ca.Issue(t).TLS(t)
	hs := newHarness(t, cfg)
	hs.srv.Close() // the plain server newHarness started; its cleanup closes it again, harmlessly
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(hs.serve))
	srv.Listener = NewTLSListener(ln, &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"http/1.1"},
		MaxVersion: maxVersion, DynamicRecordSizingDisabled: true})
	srv.Start()
	hs.srv, hs.addr = srv, strings.TrimPrefix(srv.URL, "http://")
	cc := ca.ClientConfig()
	cc.MaxVersion = maxVersion
	return hs, cc
}

func (hs *harness) dialTLS(cc *tls.Config) (*wstest.Client, *owner) {
	hs.t.Helper()
	nc, err := tls.Dial("tcp", hs.addr, cc)
	if err != nil {
		hs.t.Fatal(err)
	}
	cl, err := wstest.Handshake(nc, hs.addr, "/")
	if err != nil {
		hs.t.Fatal(err)
	}
	hs.track(cl)
	return cl, hs.owner()
}

// TestTLSEcho: over TLS 1.3 and 1.2, messages of every size (one record, several records, a
// burst of small ones) are delivered to the handler and echoed back whole and in order, a
// ping is answered, and the close handshake ends the connection with one hang-up.
func TestTLSEcho(t *testing.T) {
	for _, v := range []struct {
		name string
		max  uint16
	}{{"tls1.3", tls.VersionTLS13}, {"tls1.2", tls.VersionTLS12}} {
		t.Run(v.name, func(t *testing.T) {
			hs, cc := newTLSHarness(t, Config{}, v.max)
			cl, o := hs.dialTLS(cc)
			big := bytes.Repeat([]byte("0123456789abcdef"), 60<<10/16) // 60 KiB: four records each way
			msgs := [][]byte{[]byte("hello, herald over TLS"), big}
			for i := range 200 {
				msgs = append(msgs, []byte(strings.Repeat("x", i)))
			}
			for _, m := range msgs {
				if err := cl.WriteFrame(true, byte(OpText), m); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range msgs {
				if e := hs.next(o, evMessage); e.op != OpText || !bytes.Equal(e.payload, m) {
					t.Fatalf("delivered op %d %q, want %q", e.op, head(e.payload), head(m))
				}
			}
			for _, m := range msgs {
				expectFrame(t, cl, OpText, m)
			}
			if err := cl.WriteFrame(true, byte(OpPing), []byte("p")); err != nil {
				t.Fatal(err)
			}
			expectFrame(t, cl, OpPong, []byte("p"))
			if err := cl.WriteFrame(true, byte(OpClose), CloseFrame(CloseNormal, "")[2:]); err != nil {
				t.Fatal(err)
			}
			f, err := cl.ReadFrame(waitFor)
			if err != nil || f.Op != byte(OpClose) {
				t.Fatalf("close: op %d, %v", f.Op, err)
			}
			hs.next(o, evHangup)
		})
	}
}

// TestTLSReadAhead: frames the client sends right behind its upgrade request, in records of
// their own that crypto/tls read ahead before the upgrade, are delivered.
func TestTLSReadAhead(t *testing.T) {
	hs, cc := newTLSHarness(t, Config{}, 0)
	nc, err := tls.Dial("tcp", hs.addr, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := "GET / HTTP/1.1\r\nHost: " + hs.addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"early-1", "early-2"} { // each its own record
		if _, err := nc.Write(AppendClientFrame(nil, OpText, []byte(m))); err != nil {
			t.Fatal(err)
		}
	}
	o := hs.owner()
	for _, m := range []string{"early-1", "early-2"} {
		if e := hs.next(o, evMessage); string(e.payload) != m {
			t.Fatalf("delivered %q, want %q", e.payload, m)
		}
	}
	o.cmds <- ownerCmd{kind: cmdShutdown}
	hs.next(o, evHangup)
}

// TestTLSBlockedWriter: a client that does not read fills the kernel's buffers; Writev reports
// blocked (keeping back at most one record), the writable edges come once the client reads,
// and every byte arrives in order.
func TestTLSBlockedWriter(t *testing.T) {
	hs, cc := newTLSHarness(t, Config{SendBufferBytes: 16 << 10}, 0)
	cl, o := hs.dialTLS(cc)
	const frames = 64 // 2 MiB
	sawBlocked := false
	for i := 0; i < frames; i++ {
		payload := bytes.Repeat([]byte{byte(i)}, 32<<10)
		r := o.write(AppendFrame(nil, OpBinary, payload))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.blocked {
			sawBlocked = true
			if kept := len(asTLSKept(o.c)); kept > 2*16<<10 {
				t.Fatalf("%d bytes of ciphertext kept back; want at most one record", kept)
			}
		}
	}
	if !sawBlocked {
		t.Fatal("2 MiB to a client that does not read never blocked")
	}
	for i := 0; i < frames; i++ {
		f, err := cl.ReadFrame(waitFor)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.Op != byte(OpBinary) || len(f.Payload) != 32<<10 || f.Payload[0] != byte(i) || f.Payload[len(f.Payload)-1] != byte(i) {
			t.Fatalf("frame %d: op %d, %d bytes of %d", i, f.Op, len(f.Payload), f.Payload[0])
		}
	}
}
