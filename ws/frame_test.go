package ws

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"
)

// clientFrame builds one masked client frame, as a browser would send it.
func clientFrame(fin bool, op Opcode, payload []byte, mask [4]byte) []byte {
	first := byte(op)
	if fin {
		first |= 0x80
	}
	b := []byte{first}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, mask[:]...)
	for i, x := range payload {
		b = append(b, x^mask[i&3])
	}
	return b
}

var testMask = [4]byte{0x37, 0xfa, 0x21, 0x3d}

func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + 3)
	}
	return p
}

func TestAppendFrameSizes(t *testing.T) {
	for _, tc := range []struct {
		n      int
		header []byte
	}{
		{0, []byte{0x81, 0}},
		{125, []byte{0x81, 125}},
		{126, []byte{0x81, 126, 0, 126}},
		{65535, []byte{0x81, 126, 0xff, 0xff}},
		{65536, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		p := pattern(tc.n)
		f := AppendFrame(nil, OpText, p)
		if len(f) != len(tc.header)+tc.n {
			t.Errorf("n=%d: frame is %d bytes, want %d", tc.n, len(f), len(tc.header)+tc.n)
			continue
		}
		if !bytes.Equal(f[:len(tc.header)], tc.header) {
			t.Errorf("n=%d: header % x, want % x", tc.n, f[:len(tc.header)], tc.header)
		}
		if !bytes.Equal(f[len(tc.header):], p) {
			t.Errorf("n=%d: payload differs", tc.n)
		}
		if tf := TextFrame(p); !bytes.Equal(tf, f) {
			t.Errorf("n=%d: TextFrame differs from AppendFrame", tc.n)
		}
		// AppendFrame appends: a prefix survives.
		if g := AppendFrame([]byte("xy"), OpBinary, p); string(g[:2]) != "xy" || g[2] != 0x82 || !bytes.Equal(g[3:], f[1:]) {
			t.Errorf("n=%d: AppendFrame onto a prefix is wrong", tc.n)
		}
	}
}

func TestFrameInPlaceMatchesAppendFrame(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 127, 65535, 65536, 70000} {
		for _, op := range []Opcode{OpText, OpBinary} {
			p := pattern(n)
			buf := append(make([]byte, MaxHeader, MaxHeader+n), p...)
			got := FrameInPlace(buf, op)
			want := AppendFrame(nil, op, p)
			if !bytes.Equal(got, want) {
				t.Errorf("n=%d op=%d: FrameInPlace % x..., AppendFrame % x...", n, op, head(got), head(want))
			}
			if &got[len(got)-1] != &buf[len(buf)-1] {
				t.Errorf("n=%d: FrameInPlace did not frame in place", n)
			}
		}
	}
}

func head(b []byte) []byte {
	if len(b) > 12 {
		return b[:12]
	}
	return b
}

func TestCloseFrame(t *testing.T) {
	f := CloseFrame(CloseTooBig, "message too big")
	want := append([]byte{0x88, 17, 0x03, 0xf1}, "message too big"...)
	if !bytes.Equal(f, want) {
		t.Fatalf("CloseFrame = % x, want % x", f, want)
	}
	if f := CloseFrame(4009, ""); !bytes.Equal(f, []byte{0x88, 2, 0x0f, 0xa9}) {
		t.Fatalf("CloseFrame(4009, \"\") = % x", f)
	}
	// A long reason is cut so that the control frame stays within 125 bytes.
	f = CloseFrame(4200, strings.Repeat("x", 300))
	if f[1] != 125 || len(f) != 127 {
		t.Fatalf("long reason: payload length %d, frame %d bytes; want 125 and 127", f[1], len(f))
	}
	if got := binary.BigEndian.Uint16(f[2:]); got != 4200 {
		t.Fatalf("long reason: code %d", got)
	}
	// The cut must not split a character: a peer fails the connection on a close reason
	// that is not valid UTF-8 (RFC 6455 §8.1), losing the code.
	f = CloseFrame(4009, strings.Repeat("é", 100))
	if reason := f[4:]; !utf8.Valid(reason) {
		t.Fatalf("cut reason is not valid UTF-8: % x", reason[len(reason)-4:])
	}
	if f[1] > 125 {
		t.Fatalf("cut reason: payload length %d", f[1])
	}
	// The frame parses as a valid control frame.
	h, ok, bad := parseHeader(maskOf(f), 1<<20)
	if !ok || bad != nil || h.op != OpClose || !h.fin {
		t.Fatalf("close frame does not parse: %+v %v %v", h, ok, bad)
	}
}

// maskOf turns a server frame (7-bit length) into the same frame masked with a zero mask.
func maskOf(f []byte) []byte {
	out := []byte{f[0], f[1] | 0x80, 0, 0, 0, 0}
	return append(out, f[2:]...)
}

func TestParseHeaderValid(t *testing.T) {
	for _, n := range []int{0, 125, 126, 65535, 65536} {
		f := clientFrame(true, OpBinary, pattern(n), testMask)
		h, ok, bad := parseHeader(f, 1<<20)
		if !ok || bad != nil {
			t.Fatalf("n=%d: ok=%v bad=%v", n, ok, bad)
		}
		wantSize := 6
		if n >= 126 {
			wantSize = 8
		}
		if n > 0xFFFF {
			wantSize = 14
		}
		if h.length != n || h.size != wantSize || h.op != OpBinary || !h.fin || h.mask != testMask {
			t.Fatalf("n=%d: header %+v", n, h)
		}
		// Every strict prefix of the header is "need more", never an error.
		for i := 0; i < h.size; i++ {
			if _, ok, bad := parseHeader(f[:i], 1<<20); ok || bad != nil {
				t.Fatalf("n=%d prefix %d: ok=%v bad=%v", n, i, ok, bad)
			}
		}
	}
	// A message of exactly the limit is allowed.
	if _, ok, bad := parseHeader(clientFrame(true, OpText, pattern(300), testMask), 300); !ok || bad != nil {
		t.Fatalf("exactly max: ok=%v bad=%v", ok, bad)
	}
	// Control frames of 125 bytes and continuation frames are fine.
	if h, ok, bad := parseHeader(clientFrame(true, OpPing, pattern(125), testMask), 1000); !ok || bad != nil || h.op != OpPing {
		t.Fatalf("125-byte ping: %+v ok=%v bad=%v", h, ok, bad)
	}
	if h, ok, bad := parseHeader(clientFrame(false, OpContinuation, pattern(3), testMask), 1000); !ok || bad != nil || h.fin {
		t.Fatalf("continuation: %+v ok=%v bad=%v", h, ok, bad)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	m := []byte{1, 2, 3, 4}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	for _, tc := range []struct {
		name string
		b    []byte
		code int
	}{
		{"rsv1", cat([]byte{0xC1, 0x80}, m), CloseProtocolError},
		{"rsv2", cat([]byte{0xA1, 0x80}, m), CloseProtocolError},
		{"rsv3", cat([]byte{0x91, 0x80}, m), CloseProtocolError},
		{"unmasked", []byte{0x81, 0x02, 'h', 'i'}, CloseProtocolError},
		{"unmasked empty", []byte{0x81, 0x00}, CloseProtocolError},
		{"opcode 3", cat([]byte{0x83, 0x80}, m), CloseProtocolError},
		{"opcode 7", cat([]byte{0x87, 0x80}, m), CloseProtocolError},
		{"opcode 0xB", cat([]byte{0x8B, 0x80}, m), CloseProtocolError},
		{"opcode 0xF", cat([]byte{0x8F, 0x80}, m), CloseProtocolError},
		{"ping 126 bytes", cat([]byte{0x89, 0x80 | 126, 0, 126}, m), CloseProtocolError},
		{"close 16-bit 200", cat([]byte{0x88, 0x80 | 126, 0, 200}, m), CloseProtocolError},
		{"fragmented ping", cat([]byte{0x09, 0x85}, m), CloseProtocolError},
		{"fragmented close", cat([]byte{0x08, 0x82}, m), CloseProtocolError},
		{"fragmented pong", cat([]byte{0x0A, 0x80}, m), CloseProtocolError},
		{"16-bit over max", cat([]byte{0x82, 0x80 | 126, 0x03, 0xE9}, m), CloseTooBig}, // 1001 > 1000
		{"7-bit over max", cat([]byte{0x82, 0x80 | 125}, m), CloseTooBig},
		{"64-bit over max", cat([]byte{0x82, 0x80 | 127}, u64(1001), m), CloseTooBig},
		{"64-bit huge", cat([]byte{0x82, 0x80 | 127}, u64(1<<40), m), CloseTooBig},
		{"64-bit msb set", cat([]byte{0x82, 0x80 | 127}, u64(1<<63|5), m), CloseTooBig},
		{"64-bit all ones", cat([]byte{0x81, 0x80 | 127}, u64(^uint64(0)), m), CloseTooBig},
	} {
		max := 1000
		if tc.name == "7-bit over max" {
			max = 124
		}
		_, ok, bad := parseHeader(tc.b, max)
		if ok || bad == nil {
			t.Errorf("%s: ok=%v bad=%v, want an error", tc.name, ok, bad)
			continue
		}
		if bad.code != tc.code || bad.reason == "" {
			t.Errorf("%s: code %d (%q), want %d", tc.name, bad.code, bad.reason, tc.code)
		}
	}
}

func TestUnmask(t *testing.T) {
	masks := [][4]byte{{0, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}, testMask, {1, 2, 3, 4}}
	for _, mask := range masks {
		for n := 0; n <= 20; n++ {
			// Unmask at offsets 0..3 of a larger buffer too: frames start anywhere.
			for off := 0; off < 4; off++ {
				plain := pattern(n)
				buf := make([]byte, off+n+3)
				for i := range buf {
					buf[i] = 0xAA
				}
				for i := 0; i < n; i++ {
					buf[off+i] = plain[i] ^ mask[i%4]
				}
				unmask(buf[off:off+n], mask)
				if !bytes.Equal(buf[off:off+n], plain) {
					t.Fatalf("mask % x n=%d off=%d: got % x want % x", mask, n, off, buf[off:off+n], plain)
				}
				for i, x := range buf {
					if (i < off || i >= off+n) && x != 0xAA {
						t.Fatalf("mask % x n=%d off=%d: byte %d outside the payload changed", mask, n, off, i)
					}
				}
			}
		}
	}
}
