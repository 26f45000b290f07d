//go:build linux && !heraldportable

package ws

import (
	"bytes"
	"reflect"
	"testing"
	"unsafe"
)

// asTLSKept returns the ciphertext c's TLS layer keeps back for the kernel.
func asTLSKept(c *Conn) []byte {
	h := asTLS(c).h
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.out...)
}

// TestTLSReleasesHandshakeBuffers: a TLS connection attached to the engine keeps no input
// buffer of its handshake (crypto/tls's rawInput and hand): if this fails after a Go upgrade,
// crypto/tls's fields changed and releaseHandshakeBuffers no longer saves that memory.
func TestTLSReleasesHandshakeBuffers(t *testing.T) {
	if tlsBuffers[0] < 0 {
		t.Fatal("crypto/tls.Conn has no rawInput, input and hand fields of the expected types any more")
	}
	hs, cc := newTLSHarness(t, Config{}, 0)
	cl, o := hs.dialTLS(cc)
	if err := cl.WriteText("after the release"); err != nil {
		t.Fatal(err)
	}
	if e := hs.next(o, evMessage); string(e.payload) != "after the release" {
		t.Fatalf("delivered %q", e.payload)
	}
	expectFrame(t, cl, OpText, []byte("after the release"))
	// Released at attach (nothing else used the conn then): a fresh handshake shows it.
	tc := asTLS(o.c).tc
	v := reflect.ValueOf(tc).Elem()
	hand := (*bytes.Buffer)(unsafe.Pointer(v.Field(tlsBuffers[2]).UnsafeAddr()))
	if hand.Cap() != 0 {
		t.Fatalf("the handshake buffer keeps %d bytes", hand.Cap())
	}
}
